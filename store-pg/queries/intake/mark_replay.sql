UPDATE deliveries SET outcome = 'duplicate', status_code = 200, reason = $1,
    payload = NULL, duplicate_of = $2
WHERE id = $3
