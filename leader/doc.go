// Package leader elects one leader among replicas on a [lock.Locker]: the
// replica that holds the election's lock leads, the others queue for it
// and wait.
//
//	locker, err := lock.New(rdb, lock.WithOwnerLabel(podName))
//	if err != nil { ... }
//	defer locker.Close()
//	err = leader.Run(ctx, locker, "reconciler", func(ctx context.Context) error {
//		return reconcile(ctx) // ctx ends when leadership is lost or ctx ends
//	})
//
// # Guarantees
//
// They are the lock's (docs/guarantees.md):
//
//   - One leader at a time, on one Redis master that keeps its data (or a
//     quorum of masters with [lock.NewQuorum]). The lead context of a
//     leader ends, with cause [lock.ErrLost], before its lease can end in
//     Redis by the drift allowance the Client keeps ([lock.WithDrift]): a
//     leader is told before anyone else can lead. A leader that ignores its
//     context, or a process frozen past its lease (a GC pause, SIGSTOP, a
//     VM migration), may still act after another leader started: guard
//     the leader's writes with its fencing token ([Election.Token],
//     [lock.FencingToken] of the lead context and [Key]), which strictly
//     increases with every term, and have storage refuse older tokens.
//     When a frozen process runs again, its lead context may not have
//     ended yet (its timer has not fired): [Election.IsLeader],
//     [Election.Token], [lock.Held] and [lock.FencingToken] check the
//     lease's validity at once, and end the lead context when it ran out.
//     Check one of them, and ctx.Err() ([lock.Held] alone does not look
//     at it), right before each write.
//   - A leader that returns, or whose context ends (shutdown), resigns: it
//     releases the lock, which the queue hands to the next replica at
//     once, not after a lease.
//   - A crashed leader is replaced within one lease (the Client's default
//     lease, or [WithLease]).
//
// Any replica, leading or not, reads who leads with [Current] and follows
// changes with [Observe]: the leader is the lock's owner, whose label
// ([lock.WithOwnerLabel]) names its process.
package leader
