package main

import "testing"

const infoSample = "# Commandstats\r\n" +
	"cmdstat_evalsha:calls=20,usec=200,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_hget:calls=20,usec=20,usec_per_call=1.00,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_info:calls=3,usec=90,usec_per_call=30.00,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_client|setinfo:calls=2,usec=2,usec_per_call=1.00,rejected_calls=0,failed_calls=0\r\n" +
	"\r\n# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:0.250000\r\nused_cpu_sys_children:9.000000\r\n"

func TestParseStats(t *testing.T) {
	st, err := parseStats(infoSample)
	if err != nil {
		t.Fatal(err)
	}
	if st.cpu != 1.75 {
		t.Errorf("cpu = %v, want 1.75 (sys + user, no children)", st.cpu)
	}
	if _, ok := st.calls["info"]; ok {
		t.Error("INFO counted; the harness's own calls must be left out")
	}
	if got := st.commands(); got != 42 {
		t.Errorf("commands = %d, want 42", got)
	}
}

func TestStatsSince(t *testing.T) {
	before := redisStats{calls: map[string]int64{"evalsha": 10, "hget": 20}, usec: map[string]int64{"evalsha": 100, "hget": 20}, cpu: 1}
	after := redisStats{calls: map[string]int64{"evalsha": 30, "hget": 20, "del": 10}, usec: map[string]int64{"evalsha": 500, "hget": 20, "del": 5}, cpu: 1.5}
	d := after.since(before)
	if d.cpu != 0.5 || d.commands() != 30 {
		t.Fatalf("since = %+v, want cpu 0.5 and 30 commands", d)
	}
	if got, want := d.breakdown(10), "evalsha 2, del 1"; got != want {
		t.Errorf("breakdown = %q, want %q", got, want)
	}
	if got, want := d.usecEach(), "evalsha 20.00, del 0.50"; got != want {
		t.Errorf("usecEach = %q, want %q", got, want)
	}
}

func TestParseStatsRejectsGarbage(t *testing.T) {
	for _, text := range []string{
		"cmdstat_get:usec=1\r\n",
		"cmdstat_get:calls=x,usec=1\r\n",
		"used_cpu_sys:abc\r\n",
	} {
		if _, err := parseStats(text); err == nil {
			t.Errorf("parseStats(%q) = nil error", text)
		}
	}
}

func TestParseMemory(t *testing.T) {
	m, err := parseMemory("# Memory\r\nused_memory:1048576\r\nused_memory_human:1.00M\r\nused_memory_rss:9000000\r\n" +
		"\r\n# Keyspace\r\ndb0:keys=1000,expires=998,avg_ttl=1500\r\ndb3:keys=5,expires=0,avg_ttl=0,subexpiry=0\r\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := (memSample{used: 1 << 20, keys: 1005, expires: 998}); m != want {
		t.Errorf("parseMemory = %+v, want %+v", m, want)
	}
	if m.noTTL() != 7 {
		t.Errorf("noTTL = %d, want 7", m.noTTL())
	}
	empty, err := parseMemory("# Memory\r\nused_memory:900000\r\n\r\n# Keyspace\r\n")
	if err != nil || empty != (memSample{used: 900000}) {
		t.Errorf("an empty Redis: %+v, %v", empty, err)
	}
}

func TestParseMemoryRejectsGarbage(t *testing.T) {
	for _, text := range []string{
		"# Keyspace\r\ndb0:keys=1,expires=0\r\n", // no used_memory
		"used_memory:12M\r\n",
		"used_memory:1\r\ndb0:keys=1\r\n",
		"used_memory:1\r\ndb0:keys=x,expires=0\r\n",
	} {
		if _, err := parseMemory(text); err == nil {
			t.Errorf("parseMemory(%q) = nil error", text)
		}
	}
}

func TestParseStatsReadsUsec(t *testing.T) {
	st, err := parseStats(infoSample)
	if err != nil {
		t.Fatal(err)
	}
	if st.usec["evalsha"] != 200 || st.usec["hget"] != 20 || st.usec["client|setinfo"] != 2 {
		t.Errorf("usec = %v, want evalsha 200, hget 20, client|setinfo 2", st.usec)
	}
	if _, err := parseStats("cmdstat_get:calls=1\r\n"); err == nil {
		t.Error("a command without usec parsed")
	}
	before := redisStats{calls: map[string]int64{"evalsha": 10}, usec: map[string]int64{"evalsha": 100}}
	if d := st.since(before); d.usec["evalsha"] != 100 || d.calls["evalsha"] != 10 {
		t.Errorf("since: evalsha %d calls, %d usec; want 10, 100", d.calls["evalsha"], d.usec["evalsha"])
	}
}
