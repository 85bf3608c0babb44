package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"
	"time"
)

// runDisk measures the floor the disk sets for any durable acknowledgement: no HTTP, no
// database, only what a group-committing WAL must do. Requests fall due at the rate (open loop);
// one syncer writes, for every request due since its last round, bytesPerDelivery at the end of
// a preallocated file (wrapping round, as a WAL is reused) and fdatasyncs it. A request's latency
// runs from when it was due to the end of the sync that covered it. bytesPerDelivery is what the
// SQLite store appends to its WAL per 25 KB delivery (body overflow pages and index pages, about
// 12 frames of 4 KiB).
func runDisk(out io.Writer, rates string, duration time.Duration, bytesPerDelivery int, dir string) error {
	if err := checkLoad(rates, duration); err != nil {
		return err
	}
	if dir == "" {
		tmp, err := os.MkdirTemp("", "parley-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	rs, _ := parseRates(rates)
	fmt.Fprintf(out, "the disk alone: %d bytes written per delivery, one fdatasync per round, group commit, in %s; %v per rate\n\n", bytesPerDelivery, dir, duration)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rate/s\tsent\tsyncs\tp50\tp90\tp99\tmax\t")
	for _, r := range rs {
		lat, syncs, err := diskRate(filepath.Join(dir, fmt.Sprintf("disk-%d", r)), r, duration, bytesPerDelivery)
		if err != nil {
			return fmt.Errorf("rate %d: %w", r, err)
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\t%s\t%s\t\n", r, len(lat), syncs, ms(pct(lat, 50)), ms(pct(lat, 90)), ms(pct(lat, 99)), ms(pct(lat, 100)))
	}
	return tw.Flush()
}

func diskRate(path string, rate int, duration time.Duration, bytesPerDelivery int) (lat []time.Duration, syncs int, err error) {
	n := int(float64(rate) * duration.Seconds())
	fileSize := min(int64(64<<20), int64(n*bytesPerDelivery)) // a WAL's size, or all a short run writes
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, 0, err
	}
	defer os.Remove(path)
	defer f.Close()
	// Preallocated and synced first, so that every round overwrites blocks the file has.
	if _, err := f.WriteAt(make([]byte, fileSize), 0); err != nil {
		return nil, 0, err
	}
	if err := f.Sync(); err != nil {
		return nil, 0, err
	}
	interval := time.Second / time.Duration(rate)
	frame := make([]byte, bytesPerDelivery)
	var off int64
	start := time.Now()
	for next := 0; next < n; {
		now := time.Now()
		due := min(int(now.Sub(start)/interval)+1, n) // requests 0..due-1 have fallen due
		if due <= next {
			time.Sleep(start.Add(time.Duration(next) * interval).Sub(now))
			continue
		}
		for range due - next {
			if off+int64(len(frame)) > fileSize {
				off = 0
			}
			if _, err := f.WriteAt(frame, off); err != nil {
				return nil, 0, err
			}
			off += int64(len(frame))
		}
		if err := fdatasyncFile(f); err != nil {
			return nil, 0, err
		}
		syncs++
		done := time.Now()
		for i := next; i < due; i++ {
			lat = append(lat, done.Sub(start.Add(time.Duration(i)*interval)))
		}
		next = due
	}
	slices.Sort(lat)
	return lat, syncs, nil
}
