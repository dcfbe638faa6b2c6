DELETE FROM payload_digests WHERE (signer, sha256) IN (
    SELECT signer, sha256 FROM payload_digests WHERE received_at < $1 LIMIT $2)
