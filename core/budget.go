package core

import "fmt"

// Budget bounds what Parley reads from a repository, so that a file or a pull request written to
// exhaust it (a 20 MB manifest of 800,000 keys, a 7 MB Terraform string) becomes a problem named
// in the verdict instead of gigabytes of memory and minutes of work. `parley review`, the App's
// check, the drift loop's discovery and the ledger share it. The zero value means the defaults
// (DefaultBudget); a field left zero takes its default.
type Budget struct {
	// FileBytes is the largest file read and parsed. Default 8 MiB, the ledger's cap.
	FileBytes int64
	// FieldsPerFile is the most fields one file may change and still be judged. Default 20,000.
	FieldsPerFile int
	// FieldsPerChange is the most fields one pull request (or one batch) may change in all; files
	// past it are not judged. Default 50,000.
	FieldsPerChange int
	// ValueBytes is the longest value (as JSON text) Parley judges and echoes. Default 64 KiB.
	ValueBytes int
}

// DefaultBudget is the budget Parley works within when none is set.
func DefaultBudget() Budget {
	return Budget{FileBytes: 8 << 20, FieldsPerFile: 20_000, FieldsPerChange: 50_000, ValueBytes: 64 << 10}
}

// WithDefaults returns b with every zero or negative field set to its default.
func (b Budget) WithDefaults() Budget {
	d := DefaultBudget()
	if b.FileBytes <= 0 {
		b.FileBytes = d.FileBytes
	}
	if b.FieldsPerFile <= 0 {
		b.FieldsPerFile = d.FieldsPerFile
	}
	if b.FieldsPerChange <= 0 {
		b.FieldsPerChange = d.FieldsPerChange
	}
	if b.ValueBytes <= 0 {
		b.ValueBytes = d.ValueBytes
	}
	return b
}

// FileTooLarge says that the file at path, of size bytes, is above the budget and not judged:
// "k8s/prod/big.yaml: 19.9 MB, above the 8 MiB Parley reads; not judged".
func (b Budget) FileTooLarge(path string, size int64) string {
	return fmt.Sprintf("%s: %s, above the %s Parley reads; not judged", path, Size(size), Size(b.FileBytes))
}

// TooManyFields says that the file at path changes n fields, above the budget, and is not judged.
func (b Budget) TooManyFields(path string, n int) string {
	return fmt.Sprintf("%s: %d changed fields, above the %d Parley judges in one file; not judged", path, n, b.FieldsPerFile)
}

// ValueTooLarge says that a field's value of size bytes is above the budget and not judged.
func (b Budget) ValueTooLarge(f Field, size int) string {
	return fmt.Sprintf("%s: a value of %s, above the %s Parley judges; not judged", f, Size(int64(size)), Size(int64(b.ValueBytes)))
}

// Size renders a byte count for people: binary units for round budgets ("8 MiB", "64 KiB"),
// decimal ones with a tenth for measured sizes ("19.9 MB").
func Size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0 && n < 1<<20:
		return fmt.Sprintf("%d KiB", n>>10)
	case n >= 1_000_000:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1_000:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d bytes", n)
}
