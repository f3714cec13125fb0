// Package httplock holds distributed locks of package lock around
// net/http handlers, keyed by Go 1.22 ServeMux patterns, and replays the
// stored answer of a request retried with the same Idempotency-Key.
//
// It is package ginlock for net/http, and shares its implementation: the
// same key templates and escaping, the same answers, the same hold while
// the handler runs. Declare the lock on the route:
//
//	locker, err := lock.New(rdb)
//	if err != nil { ... }
//	mux.Handle("POST /orders/{id}/pay", httplock.New(locker, "orders:{id}")(pay))
//
// While pay runs for order 42, another POST /orders/42/pay, on any replica
// sharing the Redis, is answered at once with 409 Conflict, a Retry-After
// header (1 s by default, never past the holder's lease) and an RFC 9457
// application/problem+json body; [WithWait] makes it wait instead. A Redis
// that does not answer gets the request a 503 within [WithWait]'s wait or
// [WithAcquireTimeout] (1 s by default). The lock is held from the moment
// it is taken until pay returns or panics, renewed for as long as that
// takes, also after the client went away; the release is sent as pay
// returns, and the answer waits for it 100 ms at most.
//
// # Key templates
//
// A template is literal text with placeholders in braces:
//
//	{id}, {param.id}     path value id: r.PathValue("id"), a wildcard of the route's pattern
//	{query.tenant}       first value of query parameter tenant
//	{header.X-Tenant}    first value of header X-Tenant
//	{value.user}         what the WithValue("user", fn) function returns
//
// A missing or empty value answers 400 Bad Request before any Redis call;
// a template naming a wildcard that the pattern of the route the request
// matched (r.Pattern) lacks answers 500 (the route is misconfigured). A
// request no ServeMux routed has no pattern, and so no path values: its
// {id} is missing. Values are escaped, and templates are checked, as in
// ginlock (see "Key templates" in [github.com/lockkit/lockkit/ginlock]):
// both packages give the same key for the same values.
//
// # Inside the handler
//
// r.Context() is the lock context, cancelled with cause [context.Canceled]
// when the client goes away (the lock is still held), with cause
// [lock.ErrLost] if the lease is lost, and with a cause matching
// [lock.ErrNotHeld] once the handler has returned. [Key] returns the
// request's lock key and [FencingToken] its fencing token. Pass
// r.Context() to code that takes locks: a Lock of the same key with it
// re-enters the request's hold instead of waiting for it, which is what
// makes an httplock middleware on a group of routes and another of the
// same key on one of them work.
//
// [Limit] lets up to N requests with the same key run at once, and
// [RLock] holds the key shared with other readers, as ginlock's Limit and
// RLock do.
package httplock
