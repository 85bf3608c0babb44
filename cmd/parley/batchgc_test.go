package main

import (
	"math"
	"os"
	"runtime/debug"
	"testing"
)

func TestLedgerTradesMemoryForGarbageCollection(t *testing.T) {
	// t.Setenv restores the variables after the test; an empty value still counts as set, so they
	// are then unset for the test itself.
	for _, k := range []string{"GOGC", "GOMEMLIMIT"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	restore := tradeMemoryForGC()
	percent, limit := debug.SetGCPercent(-1), debug.SetMemoryLimit(-1)
	debug.SetGCPercent(percent)
	restore()
	if percent != batchGCPercent || limit != batchMemoryCeil {
		t.Fatalf("during the command: GOGC %d, limit %d; want %d, %d", percent, limit, batchGCPercent, batchMemoryCeil)
	}
	if p := debug.SetGCPercent(-1); p == batchGCPercent {
		t.Fatalf("GOGC still %d after restore", p)
	} else {
		debug.SetGCPercent(p)
	}
	if l := debug.SetMemoryLimit(-1); l == batchMemoryCeil {
		t.Fatalf("memory limit still %d after restore", l)
	}
}

func TestLedgerLeavesAUsersGOGCAlone(t *testing.T) {
	t.Setenv("GOGC", "50")
	before := debug.SetGCPercent(-1)
	debug.SetGCPercent(before)
	restore := tradeMemoryForGC()
	defer restore()
	if p := debug.SetGCPercent(-1); p != before {
		t.Fatalf("GOGC changed to %d although the user set GOGC", p)
	} else {
		debug.SetGCPercent(p)
	}
	if l := debug.SetMemoryLimit(-1); l != math.MaxInt64 && l == batchMemoryCeil {
		t.Fatalf("memory limit set although the user set GOGC")
	}
}
