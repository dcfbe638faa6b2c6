-- wrk script for bench/intake.sh: signed GitHub `issues` deliveries.
--
--   wrk -t2 -c32 -d15s --latency -s bench/wrk/signed.lua http://127.0.0.1:PORT/webhooks/github
--
-- Every request is a POST of the same body (bench/make_payload.py writes it)
-- with the headers GitHub sends: X-GitHub-Event: issues, its own
-- X-GitHub-Delivery (UUID-shaped: run tag, thread number, per-thread counter),
-- and X-Hub-Signature-256: sha256=<hex HMAC of the body>. The signature only
-- covers the body, so it is computed once, by make_payload.py.
--
-- Environment (all optional):
--   BENCH_PAYLOAD    body file      (default bench/results/payload.json)
--   BENCH_SIGNATURE  hex signature  (default bench/results/payload.sig)
--   BENCH_RUN        run tag, a number; give every wrk run against the same
--                    database its own, or the server sees duplicate ids
--                    (default: the time)
--   BENCH_DURATION   the run's -d in seconds. When set, the last
--   BENCH_DRAIN_MS   (default 250) ms of the run send no new requests, so
--                    that normally nothing is in flight when wrk stops.
--                    (An idle connection is given an empty request, which
--                    wrk writes as nothing and then waits on.)
--   BENCH_DELIVERY_ID  when set, every request carries this one delivery
--                    id: a storm of redeliveries (bench/redelivery.sh)
--   BENCH_UNANSWERED_FILE  where done() lists the delivery ids that were
--                    sent but whose answer wrk never read (see below)
--
-- Exact accounting. A request cut off by wrk's stop may still have been
-- accepted and recorded by the server, without wrk seeing its 202. The drain
-- makes that rare; for the rest, when the server echoes the delivery id in
-- its answer (forgehand: {"outcome":"accepted","delivery_id":..,"jobs":..}),
-- each thread notes which of its ids were answered, and done() lists the
-- others, so that the database can be checked delivery by delivery.
--
-- done() prints the responses by status (and the 202s by the `outcome` field
-- of a JSON answer, where there is one) and one machine-readable line:
--   BENCH_RESULT {"requests":..,"rps":..,"p50_us":..,"p99_us":..,"status":{"202":..},..}

local payload_path = os.getenv("BENCH_PAYLOAD") or "bench/results/payload.json"
local signature_path = os.getenv("BENCH_SIGNATURE") or "bench/results/payload.sig"

local function slurp(path)
   local f = assert(io.open(path, "rb"))
   local data = f:read("*a")
   f:close()
   return data
end

local body = slurp(payload_path)
local signature = slurp(signature_path):gsub("%s+", "")
assert(signature:match("^%x+$") and #signature == 64,
       signature_path .. " must hold a hex HMAC-SHA256")

-- Distinct bodies (the default): payload.json with a nonce field last,
-- each request its own, signed here from the HMAC's state after the part
-- that is the same (make_payload.py writes payload.prefix and
-- payload.hmac). BENCH_SAME_BODY=1 sends payload.json itself every time:
-- the server records each as a replay of the first (a duplicate).
local same_body = os.getenv("BENCH_SAME_BODY") == "1" or os.getenv("BENCH_DELIVERY_ID")
local prefix, inner_state, outer_state
if not same_body then
   local dir = payload_path:match("^(.*)/[^/]*$") or "."
   prefix = slurp(dir .. "/payload.prefix")
   local words = {}
   for w in slurp(dir .. "/payload.hmac"):gmatch("%x+") do
      table.insert(words, tonumber(w, 16))
   end
   assert(#words == 16 and #prefix % 64 == 0, "payload.prefix and payload.hmac: run make_payload.py")
   inner_state = { unpack(words, 1, 8) }
   outer_state = { unpack(words, 9, 16) }
end

-- SHA-256's compression on LuaJIT's 32-bit operations (sums of a few
-- 32-bit values are exact in a double; tobit wraps them).
local bit = require("bit")
local band, bxor, bnot, rshift, lshift, ror, tobit, tohex =
   bit.band, bit.bxor, bit.bnot, bit.rshift, bit.lshift, bit.ror, bit.tobit, bit.tohex
local K = {
   0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
   0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
   0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
   0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
   0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
   0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
   0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
   0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
}
local w = {}

local function compress(h, block, at)
   for i = 0, 15 do
      local a, b, c, d = block:byte(at + i * 4, at + i * 4 + 3)
      w[i] = tobit(lshift(a, 24) + lshift(b, 16) + lshift(c, 8) + d)
   end
   for i = 16, 63 do
      local x, y = w[i - 15], w[i - 2]
      local s0 = bxor(ror(x, 7), ror(x, 18), rshift(x, 3))
      local s1 = bxor(ror(y, 17), ror(y, 19), rshift(y, 10))
      w[i] = tobit(w[i - 16] + s0 + w[i - 7] + s1)
   end
   local a, b, c, d, e, f, g, hh = h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8]
   for i = 0, 63 do
      local t1 = tobit(hh + bxor(ror(e, 6), ror(e, 11), ror(e, 25))
                       + bxor(band(e, f), band(bnot(e), g)) + K[i + 1] + w[i])
      local t2 = tobit(bxor(ror(a, 2), ror(a, 13), ror(a, 22))
                       + bxor(band(a, b), band(a, c), band(b, c)))
      hh, g, f, e, d, c, b, a = g, f, e, tobit(d + t1), c, b, a, tobit(t1 + t2)
   end
   return { tobit(h[1] + a), tobit(h[2] + b), tobit(h[3] + c), tobit(h[4] + d),
            tobit(h[5] + e), tobit(h[6] + f), tobit(h[7] + g), tobit(h[8] + hh) }
end

-- The digest of what `h` hashed so far followed by `tail` (under 56
-- bytes), `total` bytes in all.
local function finish(h, tail, total)
   local bits = total * 8
   local block = tail .. "\128" .. string.rep("\0", 55 - #tail) .. "\0\0\0\0"
      .. string.char(band(rshift(bits, 24), 255), band(rshift(bits, 16), 255),
                     band(rshift(bits, 8), 255), band(bits, 255))
   return compress(h, block, 1)
end

local function words_bytes(h)
   local out = {}
   for i = 1, 8 do
      local x = h[i]
      out[i] = string.char(band(rshift(x, 24), 255), band(rshift(x, 16), 255),
                           band(rshift(x, 8), 255), band(x, 255))
   end
   return table.concat(out)
end

-- The body with `nonce` (32 hex digits) and its signature's hex.
local function signed(nonce)
   local tail = nonce .. '"}'
   local inner = finish(inner_state, tail, 64 + #prefix + #tail)
   local outer = finish(outer_state, words_bytes(inner), 64 + 32)
   local hex = {}
   for i = 1, 8 do hex[i] = tohex(outer[i], 8) end
   return prefix .. tail, table.concat(hex)
end

local run = (tonumber(os.getenv("BENCH_RUN") or "") or os.time()) % 4294967296
local fixed_id = os.getenv("BENCH_DELIVERY_ID")
if fixed_id == "" then fixed_id = nil end
local duration_s = tonumber(os.getenv("BENCH_DURATION") or "")
local drain_ms = tonumber(os.getenv("BENCH_DRAIN_MS") or "") or 250

local function delivery_id(thread_no, counter)
   return string.format("%08x-%04x-4000-8000-%012x", run, thread_no, counter)
end

-- Wall clock in ms (LuaJIT's ffi; plain Lua has only whole seconds).
local ffi = require("ffi")
ffi.cdef [[
   typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
   int clock_gettime(int clk_id, bench_timespec *tp);
]]
local ts = ffi.new("bench_timespec")
local function now_ms()
   ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
   return tonumber(ts.tv_sec) * 1000 + tonumber(ts.tv_nsec) / 1e6
end

---------------------------------------------------------------- setup/done
-- (these run in the main Lua state; the threads have their own states)

local threads = {}

function setup(thread)
   table.insert(threads, thread)
   thread:set("thread_no", #threads)
   -- wrk calls request() once in the first thread's state to check the
   -- request before any connection exists: that one is not sent.
   thread:set("unsent_calls", #threads == 1 and 1 or 0)
end

local function json_string(s)
   return '"' .. tostring(s):gsub('[%c"\\]', function(c)
      return string.format("\\u%04x", c:byte())
   end) .. '"'
end

local function add_counts(into, from)
   for k, n in pairs(from or {}) do
      into[k] = (into[k] or 0) + n
   end
end

function done(summary, latency, requests)
   local status, outcomes, sent, answered = {}, {}, 0, 0
   local ids_echoed, unanswered = true, {}
   for _, thread in ipairs(threads) do
      local counts = thread:get("status_counts") or {}
      add_counts(status, counts)
      for _, n in pairs(counts) do answered = answered + n end
      add_counts(outcomes, thread:get("outcome_counts"))
      sent = sent + (thread:get("sent") or 0)
      if thread:get("ids_echoed") then
         local no = thread:get("thread_no")
         local seen = thread:get("answered_ids") or {}
         local unsent = thread:get("unsent_ids") or {}
         for c = 1, thread:get("counter") or 0 do
            if not seen[c] and not unsent[c] then
               table.insert(unanswered, delivery_id(no, c))
            end
         end
      else
         ids_echoed = false
      end
   end
   if answered == 0 then ids_echoed = false end

   local codes = {}
   for code in pairs(status) do table.insert(codes, code) end
   table.sort(codes)
   local non2xx = 0
   io.write("Responses by status:\n")
   local parts = {}
   for _, code in ipairs(codes) do
      io.write(string.format("  %d: %d\n", code, status[code]))
      if code < 200 or code > 299 then non2xx = non2xx + status[code] end
      table.insert(parts, string.format('"%d":%d', code, status[code]))
   end
   local oparts = {}
   for outcome, n in pairs(outcomes) do
      io.write(string.format("  202 saying %s: %d\n", outcome, n))
      table.insert(oparts, string.format('%s:%d', json_string(outcome), n))
   end
   table.sort(oparts)
   local in_flight = sent - answered
   io.write(string.format("  sent %d, answered %d, unanswered at stop %d\n",
                          sent, answered, in_flight))

   local unanswered_file = os.getenv("BENCH_UNANSWERED_FILE")
   if unanswered_file then
      local f = assert(io.open(unanswered_file, "w"))
      if ids_echoed then
         for _, id in ipairs(unanswered) do f:write(id, "\n") end
      end
      f:close()
   end

   local e = summary.errors
   local seconds = summary.duration / 1e6
   local fields = {
      string.format('"requests":%d', summary.requests),
      string.format('"duration_us":%d', summary.duration),
      string.format('"rps":%.2f', summary.requests / seconds),
      string.format('"bytes":%d', summary.bytes),
      string.format('"p50_us":%d', latency:percentile(50)),
      string.format('"p75_us":%d', latency:percentile(75)),
      string.format('"p90_us":%d', latency:percentile(90)),
      string.format('"p99_us":%d', latency:percentile(99)),
      string.format('"max_us":%d', latency.max),
      string.format('"mean_us":%.1f', latency.mean),
      '"status":{' .. table.concat(parts, ",") .. '}',
      string.format('"non_2xx":%d', non2xx),
      '"outcomes":{' .. table.concat(oparts, ",") .. '}',
      string.format('"sent":%d', sent),
      string.format('"in_flight_at_stop":%d', in_flight),
      string.format('"ids_echoed":%s', tostring(ids_echoed)),
      ids_echoed and string.format('"unanswered_ids":%d', #unanswered) or '"unanswered_ids":null',
      string.format('"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d}',
                    e.connect, e.read, e.write, e.status, e.timeout),
      string.format('"run":%d', run),
      '"payload":' .. json_string(payload_path),
      string.format('"payload_bytes":%d', #body),
   }
   io.write("BENCH_RESULT {" .. table.concat(fields, ",") .. "}\n")
end

---------------------------------------------------------------- running
-- (each thread's own state; globals so that done() can read them)

thread_no = 0
unsent_calls = 0
counter = 0
sent = 0
status_counts = {}
outcome_counts = {}
answered_ids = {} -- counter -> true, for answers that echo our delivery id
unsent_ids = {}   -- counters used by wrk's check call, never sent
ids_echoed = true -- every answer so far carried one of this thread's ids

local head, tail, deadline, id_prefix

function init(args)
   -- The request is built by hand around the one part that changes:
   -- cheaper than wrk.format() of a 9 KB body for every request.
   local lines = {
      string.format("POST %s HTTP/1.1", wrk.path),
      "Host: " .. wrk.headers["Host"],
      "User-Agent: GitHub-Hookshot/bench",
      "Accept: */*",
      "Content-Type: application/json",
      "X-GitHub-Event: issues",
      "X-GitHub-Hook-ID: 292430182",
      "X-GitHub-Hook-Installation-Target-Type: repository",
      "X-GitHub-Hook-Installation-Target-ID: 186853002",
   }
   if same_body then
      table.insert(lines, "X-Hub-Signature-256: sha256=" .. signature)
      table.insert(lines, string.format("Content-Length: %d", #body))
   else
      table.insert(lines, string.format("Content-Length: %d", #prefix + 34))
   end
   head = table.concat(lines, "\r\n") .. "\r\nX-GitHub-Delivery: "
   tail = "\r\n\r\n" .. body
   id_prefix = delivery_id(thread_no, 0):sub(1, 24)
   if duration_s then
      deadline = now_ms() + duration_s * 1000 - drain_ms
   end
end

function request()
   if deadline and unsent_calls == 0 and now_ms() >= deadline then
      return "" -- draining: this connection goes idle
   end
   counter = counter + 1
   if unsent_calls > 0 then
      unsent_calls = unsent_calls - 1
      unsent_ids[counter] = true
   else
      sent = sent + 1
   end
   if fixed_id then
      return head .. fixed_id .. tail
   end
   local id = delivery_id(thread_no, counter)
   if same_body then
      return head .. id .. tail
   end
   local this_body, sig = signed(id:gsub("-", ""))
   return head .. id .. "\r\nX-Hub-Signature-256: sha256=" .. sig .. "\r\n\r\n" .. this_body
end

function response(status, headers, body)
   status_counts[status] = (status_counts[status] or 0) + 1
   -- forgehand says in its answer what it made of the delivery
   -- ({"outcome":"accepted","delivery_id":..}); it answers 202 to one it
   -- ignores too. Counted for 202 answers; the toolkit answers "ok".
   local outcome = status == 202 and body and body:match('"outcome"%s*:%s*"(%a+)"')
   if outcome then
      outcome_counts[outcome] = (outcome_counts[outcome] or 0) + 1
   end
   if ids_echoed then
      local id = body and body:match('"delivery_id"%s*:%s*"([%x%-]+)"')
      if id and #id == 36 and id:sub(1, 24) == id_prefix then
         answered_ids[tonumber(id:sub(25), 16)] = true
      else
         ids_echoed = false
         answered_ids = {}
      end
   end
end
