SELECT payload FROM deliveries WHERE id = $1
