// Package ginlock is gin middleware that lets one request at a time, across
// all replicas of a service, run a route for the same resource ([New]),
// or at most N at a time ([Limit]).
//
// Declare the lock on the route with a key template:
//
//	locker, err := lock.New(rdb)
//	if err != nil { ... }
//	r.POST("/orders/:id/pay", ginlock.New(locker, "orders:{id}"), pay)
//
// While pay runs for order 42, another POST /orders/42/pay, on any replica
// sharing the Redis, is answered at once with 409 Conflict, a Retry-After
// header (1 s by default, never past the holder's lease) and an RFC 9457
// application/problem+json body; [WithWait] makes it wait instead. A Redis
// that does not answer gets the request a 503 within [WithWait]'s wait or
// [WithAcquireTimeout] (1 s by default).
//
// The lock is held exactly while the handler chain runs: from the moment
// it is taken until pay returns or panics, renewed for as long as that
// takes, also after the client went away (so a payment that is finished
// deliberately is never run twice by the client's retry). The release is
// sent as pay returns, and the answer waits for it 100 ms at most: on a
// Redis that answers, the order is free before the client reads its
// answer, so its next request, to any replica, is not turned away; on a
// stalled Redis the answer is not held back longer, and the release goes
// on in the background.
//
// # Key templates
//
// A template is literal text with placeholders in braces, each replaced by
// a value of the request:
//
//	{id}, {param.id}     path parameter id
//	{query.tenant}       first value of query parameter tenant
//	{header.X-Tenant}    first value of header X-Tenant
//	{value.user}         what the WithValue("user", fn) function returns
//
// for example "tenants:{header.X-Tenant}:reports:{query.year}". A missing
// or empty value answers 400 Bad Request before any Redis call. An invalid
// template makes [New] panic when the route is registered, the way
// regexp.MustCompile does; [Validate] checks one without panicking.
//
// Values are escaped: ASCII letters, digits and "-._~" stay as they are,
// every other byte becomes %XX, and a value whose escaped form is longer
// than 64 bytes is replaced by its SHA-256 digest. A placeholder must be
// separated from its neighbours by a character that escaping never
// produces, such as ':' or '/'. So no value can spill into the text around
// it: in "orders:{id}" no id gives "orders:1:refunds", the key of
// "orders:{id}:refunds", and each value takes at most 66 bytes of the key.
// Two templates give the same key only when they are equal or one has
// literal text where the other has a placeholder ("orders:{id}" and
// "orders:42"). Equal templates share a lock on purpose: use "orders:{id}"
// on both PUT /orders/:id and POST /orders/:id/pay so that the two never
// run at once for the same order.
//
// # Inside the handler
//
// c.Request's context is the lock context. It is cancelled with cause
// [context.Canceled] when the client goes away (the lock is still held:
// the handler decides whether to finish its work, for example under
// [context.WithoutCancel]), with cause [lock.ErrLost] if the lease is
// lost, and with a cause matching [lock.ErrNotHeld] once the chain has
// returned and the lock is released (a handler still running then was
// detached from the chain, see below). So pass c.Request.Context() to the
// work the lock protects and check [context.Cause] when it ends, or
// [lock.Held] before a write the lock protects. A streaming handler
// (c.Stream, server-sent events) should stop when that context is done:
// c.Stream stops only on a client disconnect by itself.
//
// [Key] returns the request's lock key and [FencingToken] its fencing
// token, for a store that rejects stale writers. Do not rebuild the key
// from the request: values are escaped. Pass c.Request.Context(), not c,
// to code that takes locks: on gin's default engine (ContextWithFallback
// off) c does not carry the lock, so a Lock of the same key with c would
// wait for its own request. A lock taken with c.Request.Context() on the
// same key re-enters instead of waiting, which is what makes a ginlock
// middleware on a route group and another on one of its routes with the
// same key work. Work started in the background with c.Copy() is not
// protected once the handler returns: its context then ends with a cause
// matching [lock.ErrNotHeld].
//
// # Middlewares that detach the handler
//
// A middleware that runs the handler on a goroutine of its own and
// returns before it (a timeout that answers 504 and lets the handler go
// on) ends the lock of a [New] placed before it while the handler still
// runs: the client's retry then gets the key. Put such a middleware
// before ginlock, so that the lock is taken and released inside the
// detached part:
//
//	r.POST("/orders/:id/pay", timeout, ginlock.New(locker, "orders:{id}"), pay)
//
// or use [Wrap], which holds the lock exactly while the handler it wraps
// runs, on whatever goroutine runs it, so the order no longer matters:
//
//	r.POST("/orders/:id/pay", timeout(ginlock.Wrap(locker, "orders:{id}", pay)))
//
// A handler detached from the chain sees its context cancelled with a
// cause matching [lock.ErrNotHeld] as the chain returns, before the
// release is sent, and [lock.Held] false once the release is under way,
// so that it can stop before a write the lock no longer protects. A
// goroutine that may outlive the handler that started it must use
// c.Copy(), as gin documents: gin reuses c once the chain has returned.
//
// Contention is not a failure: a 409 is not passed to gin.Context.Error.
// Real failures are ([ErrMissingValue], an unavailable Redis, a closed
// Client), with the key template in their text rather than the key, which
// may carry user data. Normalise values that name the same resource
// before they reach the key (case, leading zeros, Unicode forms), for
// example in a [WithValue] function: the middleware escapes values but
// does not interpret them.
//
// # Limits per key
//
// [Limit] lets up to N requests with the same key run at once, across
// replicas, instead of one: each holds one of N permits of a counting
// semaphore of package lock ([lock.Client.Acquire]) while its chain runs.
//
//	r.POST("/reports", ginlock.Limit(locker, "reports:{header.X-Tenant}", 3), report)
//
// A request beyond the limit is answered 429 Too Many Requests with
// Retry-After and a problem body, or waits its turn with [WithWait]. Key
// templates, options, the hold while the handler runs, its release and
// the other answers are those of [New]. All Limits of a key pass the same
// limit, and no New or Wrap uses it: a request that takes it otherwise
// while it is held gets 500.
//
// # Readers and writers
//
// [RLock] holds the key shared, for routes that read what a route under
// New with the same template writes: readers run together, never while
// a writer holds the key or waits for it.
//
//	r.GET("/config/:id", ginlock.RLock(locker, "config:{id}"), readConfig)
//	r.PUT("/config/:id", ginlock.New(locker, "config:{id}"), writeConfig)
package ginlock
