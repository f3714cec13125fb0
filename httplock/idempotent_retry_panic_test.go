package httplock

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"
)

// panicky is a slog handler that panics on every record at level Warn or
// above: a logger of the app's that fails.
type panicky struct{ slog.Handler }

func (p panicky) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		panic("the app's logger failed")
	}
	return p.Handler.Handle(ctx, r)
}

func (p panicky) WithAttrs(as []slog.Attr) slog.Handler { return panicky{p.Handler.WithAttrs(as)} }

// TestIdempotentAppPanicAfterRunReleases runs a handler after
// which the app's code panics: its status filter ([WithStoredStatus])
// on the answer, or its logger ([WithLogger]) on the record of a failed
// store (a key of another type holds the answer's name). The panic goes
// on, as the handler's own would, and the run lock is released, not
// kept (and renewed) until the lock Client closes: a retry of the
// request runs again instead of getting 409 forever.
func TestIdempotentAppPanicAfterRunReleases(t *testing.T) {
	answer, run := keys(DefaultKeyPrefix, "POST", payRoute, "", "k")
	for _, tc := range []struct {
		name string
		opt  IdempotencyOption
	}{
		{"status filter", WithStoredStatus(func(int) bool { panic("the app's filter failed") })},
		{"logger", WithLogger(slog.New(panicky{slog.NewTextHandler(io.Discard, nil)}))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newIdemEnv(t)
			h := e.mux(t, func(w http.ResponseWriter, r *http.Request) {
				if err := e.rdb.Set(context.Background(), answer, "not a hash", time.Minute).Err(); err != nil {
					t.Error(err)
				}
				_, _ = io.WriteString(w, "paid")
			}, tc.opt)
			func() {
				defer func() {
					if recover() == nil {
						t.Fatal("the panic did not go on")
					}
				}()
				serve(h, pay("1", "k", ""))
			}()
			waitReleased(t)
			_, unlock, err := e.locker.TryLock(context.Background(), run)
			if err != nil {
				t.Fatalf("the run lock is held after the panic: %v", err)
			}
			_ = unlock()
		})
	}
}
