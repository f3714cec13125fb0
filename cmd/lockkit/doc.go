// Command lockkit shows who holds which lockkit locks in a Redis, watches
// a lock change hands, and takes a stuck lock away from its holder.
//
//	go install github.com/lockkit/lockkit/cmd/lockkit@latest
//
// Usage:
//
//	lockkit [flags] ls [-internal] [PATTERN] held locks whose key matches PATTERN (default *);
//	                                        -internal adds integrations' own (lock.Integration.Internal)
//	lockkit [flags] show KEY                holder, hold count, lease, token and queue of KEY;
//	                                        of a semaphore, how many of its permits are held
//	                                        and by whom; of a read-write lock, its readers or writer
//	lockkit [flags] watch KEY               KEY's holder, waiters, hand-offs and releases as they change
//	lockkit [flags] unlock --force [--yes] KEY
//	                                        end KEY's hold (asks first unless --yes)
//
// Flags (before or after the verb; "lockkit VERB -h" lists them):
//
//	-redis URL    Redis to use; default $REDIS_URL, else redis://127.0.0.1:6379.
//	              redis://[user:password@]host:port[/db] or rediss:// (TLS);
//	              a comma-separated list of them is a Redis Cluster's seed
//	              list, and one URL of a cluster node is found to be one;
//	              with -quorum, the list is the independent masters of
//	              lock.NewQuorum.
//	-prefix P     key prefix the applications use (default "lockkit")
//	-o FORMAT     table (default) or json: one JSON object per lock, event
//	              or result, one a line
//	-timeout D    bound of each Redis call (default 5s)
//
// Exit codes:
//
//	0  done (ls that found nothing, show of a free key, included)
//	1  failure: Redis unreachable or refused a command (ls: after listing
//	   what the servers that answered hold)
//	2  bad usage: unknown verb or flag, missing or invalid argument, a
//	   -redis URL that does not parse (its password is never printed), a
//	   -prefix the lock package refuses, a -quorum list naming a server
//	   twice or fewer than 3
//	3  unlock --force: KEY is not held, or (after a confirmation) held by
//	   another owner than the one shown; nothing changed
//	4  unlock --force: not confirmed (answered no, stdin closed, or
//	   interrupted at the prompt); nothing changed
//
// Keys are shown as they are when printable UTF-8 without spaces, else
// Go-quoted ("orders:1\n"); -o json writes the same form in "key" and
// the exact bytes in "key_base64". A KEY or PATTERN argument that starts
// with '"' is read as such a quoted string. A key longer than 128 bytes
// once escaped is stored by its digest and listed by its Redis name
// (lockkit:{%h<digest>}), which show, watch and unlock take as KEY.
// After a confirmation, unlock --force ends only the holder it showed
// (lock.IfHeldBy): of a semaphore or read-write lock, each holder it
// showed (up to lock.MaxListedPermits), one by one, and none that came
// after; --yes ends whoever holds KEY, every holder of a semaphore or
// read-write lock.
//
// watch follows the lock from the hand-off and turn messages lockkit sends
// on the key's channels and, when the server has keyspace notifications
// on (notify-keyspace-events with K, g, h, l and x, for instance
// "Kghlx"), every change of the lock's keys as it happens. Without
// notifications (Redis's default) it says so and reads the lock every
// 100 ms, so every release, force-unlock and change of holder still
// shows, each within 100 ms.
package main
