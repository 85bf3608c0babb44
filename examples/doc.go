// Package examples holds the scenarios that define Parley's arbitration, each a directory with a
// policy (policy.hcl), a timeline of claims and clock ticks (events.jsonl) and the verdicts
// 'parley simulate' prints for it (expected.txt). The tests replay every scenario and fail when a
// verdict changes. Run one by hand with:
//
//	parley simulate examples/hpa-vs-cost/events.jsonl
package examples
