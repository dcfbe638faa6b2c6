// Baseline for bench/intake.sh: GitHub's own Node toolkit receiving the same
// signed deliveries as `forgehand serve`. Verification only, nothing stored:
// createNodeMiddleware checks headers and the X-Hub-Signature-256 HMAC, parses
// the JSON and runs one no-op `issues` handler, then answers 200.
//
//   BENCH_SECRET=... BENCH_PORT=18081 node server.mjs
import { createServer } from "node:http";
import { Webhooks, createNodeMiddleware } from "@octokit/webhooks";

const secret = process.env.BENCH_SECRET;
const port = Number(process.env.BENCH_PORT ?? 18081);
const host = "127.0.0.1"; // loopback only
if (!secret) {
  console.error("BENCH_SECRET is required");
  process.exit(2);
}

const webhooks = new Webhooks({ secret });
webhooks.on("issues", () => {}); // no-op: verification only, nothing stored

const middleware = createNodeMiddleware(webhooks, { path: "/webhooks/github" });

const server = createServer(async (req, res) => {
  if (req.method === "GET" && req.url === "/healthz") {
    res.writeHead(200, { "content-type": "text/plain" }).end("ok\n");
    return;
  }
  if (await middleware(req, res)) return;
  res.writeHead(404).end();
});

server.listen(port, host, () => {
  console.log(`octokit baseline listening on http://${host}:${port}/webhooks/github`);
});

// Nothing is stored, so there is nothing to finish: stop at once.
for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, () => process.exit(0));
}
