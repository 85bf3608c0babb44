package pages

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/parleyhq/parley/core"
)

// The timeline's geometry, in viewBox units. The width is fixed so the picture scales with the
// page (width="100%") while every coordinate stays a plain number computed here; the height grows
// with the lanes.
const (
	tlWidth    = 960.0
	tlLabelW   = 120.0 // the column on the left holding the lane labels
	tlRight    = 24.0  // room on the right so the last tick label and bar edges stay inside
	tlTop      = 28.0  // room above the lanes for the verdict label
	tlLaneH    = 26.0
	tlLaneGap  = 8.0
	tlBarInset = 2.0 // bars sit inside their lane's track, so neighbouring lanes never touch
	tlMinBar   = 4.0 // a claim lasting no time (or ending before it starts) is still visible
	tlAxisGap  = 8.0
	tlAxisH    = 30.0 // the axis line and its tick labels
	tlTextMax  = 24   // runes of a value written inside a bar; the tooltip and the table have it whole
	tlLabelMax = 16   // runes of a lane label that fit the label column at the chart's font size
	tlPlotX0   = tlLabelW
	tlPlotX1   = tlWidth - tlRight
)

// px is a coordinate in viewBox units. It prints rounded to a tenth, so output is compact and the
// same input always gives the same bytes.
type px float64

func (p px) String() string {
	return strconv.FormatFloat(math.Round(float64(p)*10)/10, 'f', -1, 64)
}

// timeline is the SVG picture of a field page, laid out in Go so the template only prints numbers
// and text.
type timeline struct {
	Height          px
	TitleID, DescID string
	Title, Desc     string
	Lanes           []lane
	Ticks           []tick
	Bars            []bar
	Verdict         *marker // nil when the page has no verdict time
	AxisY, TickY    px
	LabelX          px // right edge of the lane label column (labels are end-anchored)
	PlotX0, PlotX1  px
	PlotW, PlotTop  px // the lanes' width, and the top of the grid lines
}

// lane is one row of the picture: its track and its label.
type lane struct {
	Label, FullLabel string // FullLabel is shown as a tooltip when Label had to be shortened
	Y, H, LabelY     px
}

// tick is one labelled time on the axis, with its grid line through the lanes.
type tick struct {
	X      px
	Label  string
	Anchor string // text-anchor, so labels at the edges stay inside the picture
}

// bar is one claim or window. Each is drawn as a nested <svg> viewport: SVG clips a nested
// viewport's content to its box, so a value's text never spills into the next bar.
type bar struct {
	Claim      bool   // claims carry class "claim" and data-actor; windows neither
	Class      string // the class list of the rect
	Actor      string // data-actor, for claims
	X, Y, W, H px
	Text       string // written inside the bar
	TextY      px
	Tip        string // the <title> tooltip: everything about the bar in words
}

// marker is the vertical line at the verdict's time.
type marker struct {
	X, Y1, Y2, LabelX, LabelY px
	Label, Anchor             string
}

// windowOrder is the order of window lanes: the known kinds first in a fixed order, so pages for
// different fields line up; kinds the model does not know follow in the order they appear.
var windowOrder = []WindowKind{WindowFreeze, WindowHold, WindowGate}

// buildTimeline lays out the picture of p: the Git lane, one lane per live actor in the order each
// first claimed, then one lane per window kind present. It returns nil when there is nothing to
// draw (no claims and no windows).
func buildTimeline(p Field) *timeline {
	if len(p.Git) == 0 && len(p.Live) == 0 && len(p.Windows) == 0 {
		return nil
	}
	start, end := timeSpan(p)
	xOf := func(t time.Time) float64 {
		if t.IsZero() || !t.After(start) {
			return tlPlotX0
		}
		if !t.Before(end) {
			return tlPlotX1
		}
		return tlPlotX0 + float64(t.Sub(start))/float64(end.Sub(start))*(tlPlotX1-tlPlotX0)
	}

	tl := &timeline{
		TitleID: "timeline-title", DescID: "timeline-desc",
		Title:  "Timeline of " + p.Field.String(),
		LabelX: tlLabelW - 8, PlotX0: tlPlotX0, PlotX1: tlPlotX1,
		PlotW: tlPlotX1 - tlPlotX0, PlotTop: tlTop,
	}
	addLane := func(label string) float64 {
		y := tlTop + float64(len(tl.Lanes))*(tlLaneH+tlLaneGap)
		short := truncateRunes(label, tlLabelMax)
		full := ""
		if short != label {
			full = label
		}
		tl.Lanes = append(tl.Lanes, lane{Label: short, FullLabel: full, Y: px(y), H: tlLaneH, LabelY: px(y + tlLaneH/2 + 4)})
		return y
	}
	addBar := func(b bar, laneY, x0, x1 float64) {
		if x1-x0 < tlMinBar {
			x1 = x0 + tlMinBar
		}
		b.X, b.Y, b.W, b.H = px(x0), px(laneY+tlBarInset), px(x1-x0), px(tlLaneH-2*tlBarInset)
		b.TextY = px((tlLaneH-2*tlBarInset)/2 + 4)
		b.Text = truncateRunes(b.Text, tlTextMax)
		tl.Bars = append(tl.Bars, b)
	}

	// Git's value: each commit's value holds until the next commit changes it; the last holds to
	// the end of the picture.
	y := addLane("Git")
	for i, c := range p.Git {
		until, untilText := end, "still in force"
		if i+1 < len(p.Git) {
			until, untilText = p.Git[i+1].At, "until "+fmtTime(p.Git[i+1].At)
		}
		addBar(bar{
			Claim: true, Class: "claim git", Actor: c.Actor.String(),
			Text: claimValue(c), Tip: claimTip("Git", c, untilText),
		}, y, xOf(c.At), xOf(until))
	}

	// Live claims: one lane per actor, in the order the actors first claimed (p.Live is oldest
	// first, so this is stable and reads top to bottom in time).
	var actors []string
	laneOf := map[string]float64{}
	for _, c := range p.Live {
		a := c.Actor.String()
		if _, ok := laneOf[a]; !ok {
			actors = append(actors, a)
			laneOf[a] = addLane(a)
		}
	}
	for _, c := range p.Live {
		until, untilText := c.Expires, ""
		switch {
		case !c.Expires.IsZero():
			untilText = "until " + fmtTime(c.Expires)
		case !p.At.IsZero():
			// A claim that does not expire is drawn up to the verdict it is judged in.
			until, untilText = p.At, "does not expire"
		default:
			until, untilText = end, "does not expire"
		}
		class := "claim live"
		if c.Yield {
			class = "claim live yield"
		}
		addBar(bar{
			Claim: true, Class: class, Actor: c.Actor.String(),
			Text: claimValue(c), Tip: claimTip("live", c, untilText),
		}, laneOf[c.Actor.String()], xOf(c.At), xOf(until))
	}

	// Windows: one lane per kind present.
	var kinds []WindowKind
	seen := map[WindowKind]bool{}
	for _, w := range p.Windows {
		seen[w.Kind] = true
	}
	for _, k := range windowOrder {
		if seen[k] {
			kinds = append(kinds, k)
			delete(seen, k)
		}
	}
	for _, w := range p.Windows {
		if seen[w.Kind] {
			kinds = append(kinds, w.Kind)
			delete(seen, w.Kind)
		}
	}
	for _, k := range kinds {
		ly := addLane(windowKindName(k))
		for _, w := range p.Windows {
			if w.Kind != k {
				continue
			}
			until, untilText := w.Until, "until "+fmtTime(w.Until)
			if until.IsZero() {
				until, untilText = end, "open-ended"
			}
			label := w.Label
			if label == "" {
				label = string(w.Kind)
			}
			addBar(bar{
				Class: "window " + windowClass(w.Kind), Text: label,
				Tip: fmt.Sprintf("%s: %s\nfrom %s, %s", windowKindName(w.Kind), label, fmtTime(w.From), untilText),
			}, ly, xOf(w.From), xOf(until))
		}
	}

	lanesBottom := tlTop + float64(len(tl.Lanes))*(tlLaneH+tlLaneGap) - tlLaneGap
	tl.AxisY = px(lanesBottom + tlAxisGap)
	tl.TickY = px(lanesBottom + tlAxisGap + 16)
	tl.Height = px(lanesBottom + tlAxisGap + tlAxisH)

	for _, tk := range axisTicks(start, end) {
		x := xOf(tk.at)
		anchor := "middle"
		if x > tlPlotX1-60 {
			anchor = "end"
		}
		tl.Ticks = append(tl.Ticks, tick{X: px(x), Label: tk.label, Anchor: anchor})
	}

	decision := string(p.Verdict.Decision)
	if decision == "" {
		decision = "none"
	}
	if !p.At.IsZero() {
		x := xOf(p.At)
		m := &marker{X: px(x), Y1: px(tlTop - 10), Y2: tl.AxisY, LabelY: 14, Label: "verdict: " + decision}
		// The label sits on whichever side of the line has room.
		if x > tlPlotX1-140 {
			m.LabelX, m.Anchor = px(x-4), "end"
		} else {
			m.LabelX, m.Anchor = px(x+4), "start"
		}
		tl.Verdict = m
	}

	tl.Desc = timelineDesc(p, actors, kinds, start, end, decision)
	return tl
}

// timeSpan returns the picture's time axis: from the earliest claim, window or verdict time to the
// latest, widened to an hour when everything happened at one instant.
func timeSpan(p Field) (start, end time.Time) {
	see := func(t time.Time) {
		if t.IsZero() {
			return
		}
		if start.IsZero() || t.Before(start) {
			start = t
		}
		if end.IsZero() || t.After(end) {
			end = t
		}
	}
	see(p.At)
	for _, c := range p.Git {
		see(c.At)
	}
	for _, c := range p.Live {
		see(c.At)
		see(c.Expires)
	}
	for _, w := range p.Windows {
		see(w.From)
		see(w.Until)
	}
	if start.IsZero() {
		// Nothing carries a time: draw an arbitrary but fixed hour rather than fail.
		start = time.Unix(0, 0).UTC()
		end = start
	}
	if !end.After(start) {
		end = start.Add(time.Hour)
	}
	return start.UTC(), end.UTC()
}

type axisTick struct {
	at    time.Time
	label string
}

// tickSteps are the round steps tried for the axis, smallest first.
var tickSteps = []time.Duration{
	10 * time.Second, 15 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour,
	24 * time.Hour, 2 * 24 * time.Hour, 3 * 24 * time.Hour, 4 * 24 * time.Hour, 7 * 24 * time.Hour, 10 * 24 * time.Hour, 14 * 24 * time.Hour, 28 * 24 * time.Hour,
	56 * 24 * time.Hour, 91 * 24 * time.Hour, 182 * 24 * time.Hour, 364 * 24 * time.Hour,
}

// axisTicks returns 4 to 6 labelled times between start and end: the smallest round step (aligned
// to UTC, since time.Truncate counts from the zero time, a UTC midnight) that gives that many, or
// else the span cut into five equal parts.
func axisTicks(start, end time.Time) []axisTick {
	var times []time.Time
	step := end.Sub(start) / 5
	for _, s := range tickSteps {
		first := start.Truncate(s)
		if first.Before(start) {
			first = first.Add(s)
		}
		if first.After(end) {
			continue
		}
		n := int(end.Sub(first)/s) + 1
		if n >= 4 && n <= 6 {
			for i := 0; i < n; i++ {
				times = append(times, first.Add(time.Duration(i)*s))
			}
			step = s
			break
		}
	}
	if times == nil {
		for i := 0; i <= 5; i++ {
			times = append(times, start.Add(time.Duration(i)*step))
		}
	}
	// A tick writes its date only when it differs from the previous tick's, so labels stay short
	// enough not to collide; the first always has it.
	clock := "15:04"
	if step%time.Minute != 0 {
		clock = "15:04:05"
	}
	out := make([]axisTick, len(times))
	prevDate := ""
	for i, t := range times {
		t = t.UTC()
		date := t.Format("2006-01-02")
		var label string
		switch {
		case step >= 24*time.Hour && step%(24*time.Hour) == 0:
			label = date
		case date != prevDate:
			label = date + " " + t.Format(clock)
		default:
			label = t.Format(clock)
		}
		prevDate = date
		out[i] = axisTick{at: t, label: label}
	}
	return out
}

// timelineDesc says in words what the picture shows, for the SVG's <desc>.
func timelineDesc(p Field, actors []string, kinds []WindowKind, start, end time.Time, decision string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "From %s to %s. ", fmtTime(start), fmtTime(end))
	fmt.Fprintf(&b, "Git set the value %s. ", plural(len(p.Git), "time", "times"))
	if len(p.Live) == 0 {
		b.WriteString("No live claims. ")
	} else {
		fmt.Fprintf(&b, "%s made outside Git by %s. ", plural(len(p.Live), "live claim", "live claims"), strings.Join(actors, ", "))
	}
	if len(kinds) > 0 {
		names := make([]string, len(kinds))
		for i, k := range kinds {
			names[i] = string(k)
		}
		fmt.Fprintf(&b, "%s: %s. ", plural(len(p.Windows), "window", "windows"), strings.Join(names, ", "))
	}
	if !p.At.IsZero() {
		fmt.Fprintf(&b, "The verdict at %s: %s. ", fmtTime(p.At), decision)
	}
	b.WriteString("The claims table below lists the same claims.")
	return b.String()
}

// claimValue is what a bar says: the value wanted, or that the actor yields.
func claimValue(c core.Claim) string {
	if c.Yield {
		return "yield"
	}
	return c.Value.String()
}

// claimTip is a claim's tooltip: who, what, why and when, one fact a line. until ends the last
// line: "until <time>", "still in force" or "does not expire".
func claimTip(source string, c core.Claim, until string) string {
	return fmt.Sprintf("%s claim by %s: %s\nintent: %s\nmotivation: %s\nfrom %s, %s",
		source, c.Actor.String(), claimValue(c), intentText(c.Intent), motivationText(c.Motivation), fmtTime(c.At), until)
}

// windowKindName is a window lane's label.
func windowKindName(k WindowKind) string {
	switch k {
	case WindowFreeze:
		return "Freeze"
	case WindowHold:
		return "Hold"
	case WindowGate:
		return "Gate"
	}
	return string(k)
}

// windowClass is the CSS class of a window kind; kinds the model does not know share one, so data
// never writes class names.
func windowClass(k WindowKind) string {
	switch k {
	case WindowFreeze, WindowHold, WindowGate:
		return string(k)
	}
	return "other"
}

// truncateRunes shortens s to at most n runes, ending with an ellipsis when it cut.
func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
