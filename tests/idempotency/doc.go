// Package idempotency tests httplock's Idempotency-Key middleware the way
// a payment service runs it: three replica processes, each with its own
// lock Client, on one real redis-server, paying through a bank that
// counts every payment, under concurrent duplicates, retries, client
// timeouts, a stalled Redis and a crashed replica. It has only tests.
package idempotency
