SELECT stop_reason FROM jobs WHERE id = $1
