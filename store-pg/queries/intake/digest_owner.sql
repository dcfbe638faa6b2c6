-- The first delivery of a body, when a new delivery's digest is taken.
SELECT delivery FROM payload_digests WHERE signer = $1 AND sha256 = $2
