package lock

import (
	"encoding/base64"
	"os"
	"strconv"
	"strings"
)

// MaxOwnerLabel is the longest label [WithOwnerLabel] accepts, in bytes.
const MaxOwnerLabel = 24

// maxOwner is the length, in bytes, of the longest field or value Redis
// keeps in a hash of its compact encoding (hash-max-listpack-value), about
// a third of the memory of a longer one. Owners are kept one byte shorter
// (up to their 2,176,782,336th acquisition), so that the fields made of a
// mark and an owner also fit: '>'+owner in the waits hash, '!'+owner (a
// forced release) in the lock hash.
const maxOwner = 64

// WithOwnerLabel adds label to the owner every hold of the Client writes
// to Redis, next to the host name and process id that are always there,
// so that an operator who finds a key held ([Client.Inspect],
// [Client.List], the lockkit command) can tell which process holds it:
// a pod or instance name, a service and version. The label must be 1 to
// [MaxOwnerLabel] bytes of printable ASCII without spaces. Default: no
// label.
//
// The owner is written by the scripts that take the key anyway: a label
// costs no Redis call, only its bytes in each call and in Redis. Owners
// are kept within 63 bytes, so that Redis stores a lock in its compact
// form: the host name is shortened to what the label leaves room for.
func WithOwnerLabel(label string) Option {
	return func(c *config) {
		c.label = label
		if err := checkLabel(label); err != nil {
			c.bad = append(c.bad, err)
		}
	}
}

func checkLabel(label string) error {
	if label == "" || len(label) > MaxOwnerLabel {
		return invalidf("owner label %q must be 1 to %d bytes", label, MaxOwnerLabel)
	}
	for _, r := range label {
		if r <= ' ' || r > '~' {
			return invalidf("owner label %q must be printable ASCII, without spaces", label)
		}
	}
	return nil
}

// Owner is who holds or waits for a lock, read back from Redis.
type Owner struct {
	// ID is the owner as written in Redis: "<client>:<sequence>", where
	// <client> is "<random>@<host>:<pid>[:<label>]" (random: 128 bits in
	// base64url).
	ID string
	// Host is the host name of the holder's process (its first DNS label,
	// shortened to keep the owner within 64 bytes) and PID its process id,
	// when it was made by a Client that writes them (empty and 0
	// otherwise).
	Host string
	PID  int
	// Label is the label of [WithOwnerLabel], if any.
	Label string
	// Internal tells an owner of a lock taken with [Integration.Internal]: an
	// integration's own bookkeeping, such as cronlock's tick markers, which
	// listings for people (lockkit ls) keep apart from the users' locks.
	// Its sequence starts with '_'.
	Internal bool
}

// internalMark starts the sequence of an internal owner (Owner.Internal).
const internalMark = '_'

// String returns the label, host and pid, e.g. "payments-7f9c web-1/4242",
// or the ID when they are not known.
func (o Owner) String() string {
	if o.Host == "" {
		return o.ID
	}
	s := o.Host + "/" + strconv.Itoa(o.PID)
	if o.Label != "" {
		s = o.Label + " " + s
	}
	return s
}

// clientID is the Client part of its owners: 128 random bits, then who
// the Client is, so that Redis tells which process holds a key. The label
// may contain ':'; the sequence after the last ':' never does, which is
// how queue.lua finds a Client's owners. The host name is cut so that an
// owner with a sequence of up to 6 base-36 digits, after the internal mark
// and a one-byte mark, fits in maxOwner bytes.
func clientID(random [16]byte, host, label string) string {
	who := ":" + strconv.Itoa(os.Getpid())
	if label != "" {
		who += ":" + label
	}
	r := base64.RawURLEncoding.EncodeToString(random[:])
	room := maxOwner - len(">") - len(r) - len("@") - len(who) - len(":_zzzzzz")
	if len(host) > room {
		host = host[:max(room, 1)]
	}
	return r + "@" + host + who
}

// hostName is the first label of the host name, with anything but
// printable ASCII other than space and ':' replaced by '_' (owners
// travel in space-separated messages).
func hostName() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "unknown"
	}
	if h, _, _ = strings.Cut(h, "."); h == "" {
		return "unknown"
	}
	return strings.Map(func(r rune) rune {
		if r <= ' ' || r > '~' || r == ':' {
			return '_'
		}
		return r
	}, h)
}

// ParseOwner reads an owner ID as stored in Redis. An ID of another form
// (from an older Client) gives an Owner with only ID set.
func ParseOwner(id string) Owner {
	o := Owner{ID: id}
	client, seq, ok := cutLast(id, ":")
	if !ok {
		return o
	}
	o.Internal = len(seq) > 0 && seq[0] == internalMark
	_, who, ok := strings.Cut(client, "@")
	if !ok {
		return o
	}
	host, rest, ok := strings.Cut(who, ":")
	if !ok {
		return o
	}
	pid, label, _ := strings.Cut(rest, ":")
	n, err := strconv.Atoi(pid)
	if err != nil || host == "" {
		return o
	}
	o.Host, o.PID, o.Label = host, n, label
	return o
}

func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}
