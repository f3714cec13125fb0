// Package ginlock is gin middleware that lets one request at a time, across
// all replicas of a service, run a route for the same resource.
//
// Declare the lock on the route with a key template:
//
//	locker, err := lock.New(rdb)
//	if err != nil { ... }
//	r.POST("/orders/:id/pay", ginlock.New(locker, "orders:{id}"), pay)
//
// While pay runs for order 42, another POST /orders/42/pay, on any replica
// sharing the Redis, is answered at once with 409 Conflict, a Retry-After
// header and an RFC 9457 application/problem+json body; [WithWait] makes it
// wait instead. The lock is released when pay returns, panics, or the
// client goes away.
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
// c.Request's context is the lock context: it is cancelled with cause
// [lock.ErrLost] if the lease is lost, so pass c.Request.Context() to the
// work the lock protects, and check [context.Cause] when it ends. A lock
// taken with it on the same key re-enters instead of waiting, which is
// what makes a ginlock middleware on a route group and another on one of
// its routes with the same key work. The lock is held only until the
// handler returns; work started in the background with c.Copy() is not
// protected.
//
// Failures are also passed to gin.Context.Error: [ErrMissingValue],
// [lock.ErrNotObtained], or the error of Redis.
package ginlock
