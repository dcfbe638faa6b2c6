INSERT INTO payload_digests (signer, sha256, event, delivery, received_at)
VALUES ($1, $2, $3, $4, $5) ON CONFLICT (signer, sha256) DO NOTHING
RETURNING delivery
