package pages

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"strings"
	"time"

	"github.com/parleyhq/parley/core"
)

// timeFormat is how every page writes a time: in UTC, to the minute, saying so.
const timeFormat = "2006-01-02 15:04 UTC"

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeFormat)
}

// RenderField writes the page of one field: its verdict with every rule's outcome, the timeline
// picture of its claims and windows, and the same facts as tables.
func RenderField(w io.Writer, p Field, links Links) error {
	field := p.Field.String()
	return render(w, fieldTmpl, page{
		Title: field + " · " + p.Repository, Index: links.Index, Repository: p.Repository,
		Body: fieldView{
			Field: field, Repository: p.Repository, At: fmtTime(p.At),
			Verdict:  newVerdictView(p.Verdict, "steps-caption"),
			Timeline: buildTimeline(p),
			Claims:   claimRows(p),
			Windows:  windowRows(p.Windows),
			Drift:    driftRows(p.Drift),
		},
	})
}

// RenderPullRequest writes the page of a pull request's verdicts: a summary table, then each
// verdict's explanation in its own section.
func RenderPullRequest(w io.Writer, p PullRequest, links Links) error {
	v := prView{
		Heading:    fmt.Sprintf("Pull request #%d: %s", p.Number, p.Title),
		Repository: p.Repository, Head: shortCommit(p.Head), At: fmtTime(p.At),
	}
	for i, vd := range p.Verdicts {
		id := fmt.Sprintf("verdict-%d", i+1)
		v.Rows = append(v.Rows, prRow{
			Field: vd.Field.String(), Href: fieldHref(links, vd.Field), ID: id,
			Verdict: newVerdictView(vd, id+"-steps-caption"),
		})
	}
	return render(w, prTmpl, page{Title: v.Heading + " · " + p.Repository, Index: links.Index, Repository: p.Repository, Body: v})
}

// RenderIndex writes a repository's index: every field with its verdict, and the gates Parley
// wrote.
func RenderIndex(w io.Writer, p Index, links Links) error {
	v := indexView{Repository: p.Repository, At: fmtTime(p.At), Total: p.Total}
	for _, f := range p.Fields {
		v.Fields = append(v.Fields, indexFieldRow{
			Field: f.Field.String(), Href: fieldHref(links, f.Field),
			Verdict: newVerdictView(f.Verdict, ""), Claims: f.Claims,
		})
	}
	for _, g := range p.Gates {
		until := fmtTime(g.Until)
		if until == "" {
			until = "until resumed"
		}
		v.Gates = append(v.Gates, gateRow{
			Field: g.Field.String(), Href: fieldHref(links, g.Field), File: g.File, Rule: g.Rule, Until: until,
		})
	}
	// The index's own link would point at itself: the header shows no navigation here.
	return render(w, indexTmpl, page{Title: p.Repository, Repository: p.Repository, Body: v})
}

// render executes a page into memory first, so a failing template never leaves half a page on w.
func render(w io.Writer, t *template.Template, p page) error {
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", p); err != nil {
		return fmt.Errorf("render page %q: %w", p.Title, err)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// page is what the shared layout needs; Body is the page's own view.
type page struct {
	Title      string
	Index      string // links.Index; the header's navigation appears only when set
	Repository string
	Body       any
}

// verdictView is a verdict with every value already written as text, so templates only print.
type verdictView struct {
	Decision      string // the decision's name, e.g. "yield"
	DecisionWords string // what it does, in a sentence
	DecisionClass string // a fixed CSS class: data never writes class names
	Winner        string // "" when there is none
	Losers        []string
	Rule          string
	Until         string
	Recheck       string
	Ask           []string
	Steps         []stepRow
	StepsID       string // id of the explanation table's caption
}

// stepRow is one explanation step with its position, numbered from 1 as people count.
type stepRow struct {
	N int
	core.Step
}

func newVerdictView(v core.Verdict, stepsID string) verdictView {
	vv := verdictView{
		Decision: string(v.Decision), DecisionWords: decisionWords(v.Decision), DecisionClass: decisionClass(v.Decision),
		Rule: v.Rule, Until: fmtTime(v.Until), Recheck: fmtTime(v.Recheck), Ask: v.Ask, StepsID: stepsID,
	}
	for i, st := range v.Explanation {
		vv.Steps = append(vv.Steps, stepRow{N: i + 1, Step: st})
	}
	if vv.Decision == "" {
		vv.Decision = "none"
	}
	if v.Winner != nil {
		vv.Winner = claimSummary(*v.Winner)
	}
	for _, l := range v.Losers {
		vv.Losers = append(vv.Losers, claimSummary(l))
	}
	return vv
}

// decisionWords says what a decision does, so the page never relies on a badge's colour.
func decisionWords(d core.Decision) string {
	switch d {
	case core.DecisionEnforceGit:
		return "Git's value is kept; the GitOps tool may revert live drift."
	case core.DecisionAdopt:
		return "The live value is written into Git."
	case core.DecisionYield:
		return "The live actor holds the field; the GitOps tool ignores it."
	case core.DecisionVeto:
		return "The claim is refused outright."
	case core.DecisionHold:
		return "The field is frozen at its current value; automatic writes stop."
	case core.DecisionEscalate:
		return "People are asked to decide."
	case "":
		return "No decision was recorded."
	}
	return "A decision this page does not know."
}

func decisionClass(d core.Decision) string {
	switch d {
	case core.DecisionEnforceGit, core.DecisionAdopt, core.DecisionYield, core.DecisionVeto, core.DecisionHold, core.DecisionEscalate:
		return "decision-" + string(d)
	}
	return "decision-other"
}

// claimSummary is a claim in one line: who wants what, and why.
func claimSummary(c core.Claim) string {
	s := c.Actor.String() + ": " + c.Value.String()
	if c.Yield {
		s = c.Actor.String() + " yields the field"
	}
	s += " (intent " + intentText(c.Intent)
	if !c.Motivation.IsZero() {
		s += ", motivation " + c.Motivation.String()
	}
	return s + ")"
}

func intentText(i core.Intent) string {
	if i == "" {
		return "not declared"
	}
	return string(i)
}

func motivationText(m core.Motivation) string {
	if m.IsZero() {
		return "none"
	}
	return m.String()
}

// shortCommit is the 12-character prefix people recognise a commit by.
func shortCommit(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// fieldHref is a field's link, or "" when the pages have no field pages to link to.
func fieldHref(links Links, f core.Field) string {
	if links.Field == nil {
		return ""
	}
	return links.Field(f)
}

type fieldView struct {
	Field, Repository, At string
	Verdict               verdictView
	Timeline              *timeline
	Claims                []claimRow
	Windows               []windowRow
	Drift                 []driftRow
}

// claimRow is one claim in the claims table: the same claims the timeline draws, in words.
type claimRow struct {
	Actor, Identity, Source, Value, Intent, Motivation, From, Until, Evidence string
}

// claimRows lists Git's claims then the live ones, the order of the timeline's lanes.
func claimRows(p Field) []claimRow {
	var rows []claimRow
	for i, c := range p.Git {
		until := "still in force"
		if i+1 < len(p.Git) {
			until = fmtTime(p.Git[i+1].At)
		}
		rows = append(rows, newClaimRow("Git", c, until))
	}
	for _, c := range p.Live {
		until := fmtTime(c.Expires)
		if until == "" {
			until = "does not expire"
		}
		rows = append(rows, newClaimRow("live", c, until))
	}
	return rows
}

func newClaimRow(source string, c core.Claim, until string) claimRow {
	r := claimRow{
		Actor: c.Actor.String(), Source: source, Value: claimValue(c),
		Intent: intentText(c.Intent), Motivation: motivationText(c.Motivation),
		From: fmtTime(c.At), Until: until, Evidence: evidenceText(c.Evidence),
	}
	// When the policy named the actor, the identity behind the name is still worth showing.
	if c.Actor.Name != "" && c.Actor.Identity.ID != "" {
		r.Identity = c.Actor.Identity.String()
	}
	return r
}

// evidenceText cites where a claim came from.
func evidenceText(e core.Evidence) string {
	var parts []string
	if e.Source != "" {
		parts = append(parts, e.Source)
	}
	if e.Commit != "" {
		parts = append(parts, "commit "+shortCommit(e.Commit))
	}
	if e.PR != 0 {
		parts = append(parts, fmt.Sprintf("pull request #%d", e.PR))
	}
	if len(e.EventIDs) > 0 {
		parts = append(parts, "event "+strings.Join(e.EventIDs, ", "))
	}
	if e.Proposal != "" {
		parts = append(parts, "proposal "+e.Proposal)
	}
	if e.Explicit {
		parts = append(parts, "stated")
	}
	if len(parts) == 0 {
		return "not recorded"
	}
	return strings.Join(parts, "; ")
}

type windowRow struct{ Kind, Label, From, Until string }

func windowRows(ws []Window) []windowRow {
	var rows []windowRow
	for _, w := range ws {
		until := fmtTime(w.Until)
		if until == "" {
			until = "open-ended"
		}
		rows = append(rows, windowRow{Kind: string(w.Kind), Label: w.Label, From: fmtTime(w.From), Until: until})
	}
	return rows
}

type driftRow struct {
	At, Evidence string
	Verdict      verdictView
}

func driftRows(ds []DriftVerdict) []driftRow {
	var rows []driftRow
	for _, d := range ds {
		rows = append(rows, driftRow{At: fmtTime(d.At), Evidence: d.Evidence, Verdict: newVerdictView(d.Verdict, "")})
	}
	return rows
}

type prView struct {
	Heading, Repository, Head, At string
	Rows                          []prRow
}

type prRow struct {
	Field, Href, ID string
	Verdict         verdictView
}

type indexView struct {
	Repository, At string
	Fields         []indexFieldRow
	Total          int // > len(Fields): only the first are listed
	Gates          []gateRow
}

type indexFieldRow struct {
	Field, Href string
	Verdict     verdictView
	Claims      int
}

type gateRow struct{ Field, Href, File, Rule, Until string }

// The templates: one layout, shared pieces, and each page's "content". They are parsed once;
// every page clones the shared set so the pages cannot see each other's content.
var (
	baseTmpl  = template.Must(template.New("layout").Parse(layoutSrc + sharedSrc + timelineSrc))
	fieldTmpl = template.Must(template.Must(baseTmpl.Clone()).Parse(fieldSrc))
	prTmpl    = template.Must(template.Must(baseTmpl.Clone()).Parse(prSrc))
	indexTmpl = template.Must(template.Must(baseTmpl.Clone()).Parse(indexSrc))
)

// layoutSrc is the page every view shares. Its one <style> block is all the styling: no external
// CSS, fonts, images or scripts, so the page is the same whether served or opened from a file.
const layoutSrc = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>{{.Title}} · Parley</title>
<style>
:root{color-scheme:light dark;--fg:#1f2328;--muted:#59636e;--bg:#fff;--line:#d1d9e0;--head:#f6f8fa;--link:#0550ae;--git:#0969da;--live:#bc4c00;--yield:#59636e;--freeze:#0a7b83;--hold:#9a6700;--gate:#8250df;--verdict:#cf222e}
@media (prefers-color-scheme:dark){:root{--fg:#e6edf3;--muted:#9198a1;--bg:#0d1117;--line:#3d444d;--head:#151b23;--link:#79c0ff;--git:#4493f8;--live:#f0883e;--yield:#9198a1;--freeze:#39c5cf;--hold:#d29922;--gate:#ab7df8;--verdict:#ff7b72}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
header,main,footer{max-width:64rem;margin:0 auto;padding:0 1rem}
header{display:flex;flex-wrap:wrap;gap:.25rem 1.5rem;align-items:baseline;padding-top:.75rem;padding-bottom:.5rem;border-bottom:1px solid var(--line)}
header .brand{margin:0;font-weight:700}
nav ul{display:flex;gap:1rem;list-style:none;margin:0;padding:0}
footer{color:var(--muted);font-size:.875rem;padding-bottom:2rem}
h1{font-size:1.5rem;line-height:1.25;overflow-wrap:anywhere}
h2{font-size:1.25rem;margin-top:2rem}
h3{font-size:1.05rem;overflow-wrap:anywhere}
a{color:var(--link)}
a:focus-visible,.scroll:focus-visible{outline:3px solid var(--link);outline-offset:2px}
code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.9em;overflow-wrap:anywhere}
.meta{color:var(--muted)}
dl.verdict{display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1rem;margin:0}
dl.verdict dt{font-weight:600}
dl.verdict dd{margin:0;overflow-wrap:anywhere}
dl.verdict ul{margin:0;padding-left:1.25rem}
.decision{display:inline-block;font-weight:700;border:2px solid currentColor;border-radius:.25rem;padding:0 .4rem;line-height:1.4}
.decision-enforce-git{color:var(--git)}
.decision-adopt{color:var(--freeze)}
.decision-yield{color:var(--live)}
.decision-veto,.decision-escalate{color:var(--verdict)}
.decision-hold{color:var(--hold)}
.decision-other{color:var(--muted)}
.scroll{overflow-x:auto;margin:0 0 1.5rem}
table{border-collapse:collapse;min-width:100%}
caption{text-align:left;font-weight:600;padding:.25rem 0 .5rem}
th,td{text-align:left;vertical-align:top;padding:.4rem .6rem;border-bottom:1px solid var(--line)}
thead th{background:var(--head);white-space:nowrap}
td.num{text-align:right}
td code,th code{overflow-wrap:normal;white-space:nowrap}
td{overflow-wrap:anywhere}
@media (max-width:40rem){.scroll table{min-width:40rem}}
.sub{display:block;color:var(--muted);font-size:.85em;font-weight:400}
.chart{display:block;min-width:40rem;height:auto;font-size:12px}
.chart text{fill:var(--fg);pointer-events:none}
.chart .lane-label{font-weight:600}
.chart .tick-label{fill:var(--muted);font-size:11px}
.chart .track{fill:var(--head)}
.chart .grid{stroke:var(--line)}
.chart .axis{stroke:var(--muted)}
.chart .claim,.chart .window{stroke-width:1.5}
.chart .claim.git{fill:var(--git);fill-opacity:.3;stroke:var(--git)}
.chart .claim.live{fill:var(--live);fill-opacity:.3;stroke:var(--live)}
.chart .claim.yield{fill:var(--yield);fill-opacity:.15;stroke:var(--yield);stroke-dasharray:4 3}
.chart .window{fill-opacity:.25}
.chart .window.freeze{fill:var(--freeze);stroke:var(--freeze)}
.chart .window.hold{fill:var(--hold);stroke:var(--hold)}
.chart .window.gate{fill:var(--gate);stroke:var(--gate)}
.chart .window.other{fill:var(--muted);stroke:var(--muted)}
.chart .verdict{stroke:var(--verdict);stroke-width:2}
.chart .verdict-label{fill:var(--verdict);font-weight:700}
</style>
</head>
<body>
<header>
<p class="brand">Parley</p>
{{- if .Index}}
<nav aria-label="Repository"><ul><li><a href="{{.Index}}">Index of {{.Repository}}</a></li></ul></nav>
{{- end}}
</header>
<main>
{{template "content" .Body}}
</main>
<footer><p>Times are in UTC. Rendered by Parley.</p></footer>
</body>
</html>
`

// sharedSrc holds the pieces more than one page uses: a field's name (linked when there are field
// pages), a decision as a word and a badge, and a verdict's explanation table.
const sharedSrc = `
{{- define "fieldname"}}{{if .Href}}<a href="{{.Href}}"><code>{{.Field}}</code></a>{{else}}<code>{{.Field}}</code>{{end}}{{end}}

{{- define "decision"}}<span class="decision {{.DecisionClass}}">{{.Decision}}</span>{{end}}

{{- define "steps"}}
{{- if .Steps}}
<div class="scroll" role="region" tabindex="0" aria-labelledby="{{.StepsID}}">
<table>
<caption id="{{.StepsID}}">Every rule's outcome, in the order the arbiter considered them</caption>
<thead><tr><th scope="col">#</th><th scope="col">Rule</th><th scope="col">Outcome</th><th scope="col">Detail</th></tr></thead>
<tbody>
{{- range .Steps}}
<tr><td class="num">{{.N}}</td><th scope="row"><code>{{.Rule}}</code></th><td>{{.Outcome}}</td><td>{{.Detail}}</td></tr>
{{- end}}
</tbody>
</table>
</div>
{{- else}}
<p>No explanation was recorded for this verdict.</p>
{{- end}}
{{- end}}
`

// timelineSrc draws the picture laid out by buildTimeline. Each bar is a nested <svg> so its text
// is clipped to it; the <title> inside each rect is its tooltip.
const timelineSrc = `
{{- define "timeline"}}
<div class="scroll" role="region" tabindex="0" aria-label="Timeline picture (scrolls sideways)">
<svg class="chart" width="100%" viewBox="0 0 960 {{.Height}}" role="img" aria-labelledby="{{.TitleID}} {{.DescID}}">
<title id="{{.TitleID}}">{{.Title}}</title>
<desc id="{{.DescID}}">{{.Desc}}</desc>
{{- range .Lanes}}
<rect class="track" x="{{$.PlotX0}}" y="{{.Y}}" width="{{$.PlotW}}" height="{{.H}}"/>
<text class="lane-label" x="{{$.LabelX}}" y="{{.LabelY}}" text-anchor="end">{{.Label}}{{if .FullLabel}}<title>{{.FullLabel}}</title>{{end}}</text>
{{- end}}
{{- range .Ticks}}
<line class="grid" x1="{{.X}}" x2="{{.X}}" y1="{{$.PlotTop}}" y2="{{$.AxisY}}"/>
<text class="tick-label" x="{{.X}}" y="{{$.TickY}}" text-anchor="{{.Anchor}}">{{.Label}}</text>
{{- end}}
<line class="axis" x1="{{.PlotX0}}" x2="{{.PlotX1}}" y1="{{.AxisY}}" y2="{{.AxisY}}"/>
<text class="tick-label" x="{{.LabelX}}" y="{{.TickY}}" text-anchor="end">UTC</text>
{{- range .Bars}}
<svg x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="{{.H}}">
{{- if .Claim}}<rect class="{{.Class}}" data-actor="{{.Actor}}" width="{{.W}}" height="{{.H}}">
{{- else}}<rect class="{{.Class}}" width="{{.W}}" height="{{.H}}">{{end}}<title>{{.Tip}}</title></rect>
{{- if .Text}}<text x="4" y="{{.TextY}}">{{.Text}}</text>{{end}}</svg>
{{- end}}
{{- with .Verdict}}
<line class="verdict" x1="{{.X}}" x2="{{.X}}" y1="{{.Y1}}" y2="{{.Y2}}"/>
<text class="verdict-label" x="{{.LabelX}}" y="{{.LabelY}}" text-anchor="{{.Anchor}}">{{.Label}}</text>
{{- end}}
</svg>
</div>
{{- end}}
`

const fieldSrc = `{{define "content"}}
<h1><code>{{.Field}}</code></h1>
<p class="meta">Repository <strong>{{.Repository}}</strong>{{if .At}} · verdict at {{.At}}{{end}}</p>

<section aria-labelledby="verdict-h">
<h2 id="verdict-h">Verdict</h2>
{{- with .Verdict}}
<dl class="verdict">
<dt>Decision</dt><dd>{{template "decision" .}} {{.DecisionWords}}</dd>
<dt>Winner</dt><dd>{{if .Winner}}{{.Winner}}{{else}}none{{end}}</dd>
<dt>Losers</dt><dd>{{if .Losers}}<ul>{{range .Losers}}<li>{{.}}</li>{{end}}</ul>{{else}}none{{end}}</dd>
<dt>Deciding rule</dt><dd><code>{{.Rule}}</code></dd>
{{- if .Until}}
<dt>Until</dt><dd>{{.Until}}</dd>
{{- end}}
{{- if .Recheck}}
<dt>Recheck</dt><dd>{{.Recheck}}</dd>
{{- end}}
{{- if .Ask}}
<dt>Asked to decide</dt><dd><ul>{{range .Ask}}<li>{{.}}</li>{{end}}</ul></dd>
{{- end}}
</dl>
{{- end}}
</section>

<section aria-labelledby="timeline-h">
<h2 id="timeline-h">Timeline</h2>
{{- if .Timeline}}
<p>Git's value on the first row, each live actor's claims on its own row, then the freezes, holds and gates; the vertical line labelled “verdict” marks the time of the verdict. Every claim drawn is listed in the claims table below.</p>
{{template "timeline" .Timeline}}
{{- else}}
<p>Nothing to draw: the field has no claims and no windows.</p>
{{- end}}
</section>

<section aria-labelledby="steps-h">
<h2 id="steps-h">Every rule's outcome</h2>
{{template "steps" .Verdict}}
</section>

<section aria-labelledby="claims-h">
<h2 id="claims-h">Claims</h2>
{{- if .Claims}}
<div class="scroll" role="region" tabindex="0" aria-labelledby="claims-caption">
<table>
<caption id="claims-caption">Every claim on the timeline: Git's history, then the live claims</caption>
<thead><tr><th scope="col">Actor</th><th scope="col">Source</th><th scope="col">Value</th><th scope="col">Intent</th><th scope="col">Motivation</th><th scope="col">From</th><th scope="col">Until</th><th scope="col">Evidence</th></tr></thead>
<tbody>
{{- range .Claims}}
<tr><th scope="row">{{.Actor}}{{if .Identity}}<span class="sub">{{.Identity}}</span>{{end}}</th><td>{{.Source}}</td><td><code>{{.Value}}</code></td><td>{{.Intent}}</td><td>{{.Motivation}}</td><td>{{.From}}</td><td>{{.Until}}</td><td>{{.Evidence}}</td></tr>
{{- end}}
</tbody>
</table>
</div>
{{- else}}
<p>No claims: neither Git nor any live actor claimed this field.</p>
{{- end}}
</section>

<section aria-labelledby="windows-h">
<h2 id="windows-h">Freezes, holds and gates</h2>
{{- if .Windows}}
<div class="scroll" role="region" tabindex="0" aria-labelledby="windows-caption">
<table>
<caption id="windows-caption">Spans of time that constrained the field</caption>
<thead><tr><th scope="col">Kind</th><th scope="col">Label</th><th scope="col">From</th><th scope="col">Until</th></tr></thead>
<tbody>
{{- range .Windows}}
<tr><th scope="row">{{.Kind}}</th><td>{{.Label}}</td><td>{{.From}}</td><td>{{.Until}}</td></tr>
{{- end}}
</tbody>
</table>
</div>
{{- else}}
<p>No freeze, hold or gate constrained this field.</p>
{{- end}}
</section>
{{- if .Drift}}

<section aria-labelledby="drift-h">
<h2 id="drift-h">Drift verdicts</h2>
<div class="scroll" role="region" tabindex="0" aria-labelledby="drift-caption">
<table>
<caption id="drift-caption">Judgements of drift on the field, oldest first</caption>
<thead><tr><th scope="col">At</th><th scope="col">Decision</th><th scope="col">Rule</th><th scope="col">Winner</th><th scope="col">Evidence</th></tr></thead>
<tbody>
{{- range .Drift}}
<tr><th scope="row">{{.At}}</th><td>{{template "decision" .Verdict}}</td><td><code>{{.Verdict.Rule}}</code></td><td>{{if .Verdict.Winner}}{{.Verdict.Winner}}{{else}}none{{end}}</td><td>{{.Evidence}}</td></tr>
{{- end}}
</tbody>
</table>
</div>
</section>
{{- end}}
{{end}}`

const prSrc = `{{define "content"}}
<h1>{{.Heading}}</h1>
<p class="meta">Repository <strong>{{.Repository}}</strong> · head commit <code>{{.Head}}</code>{{if .At}} · judged at {{.At}}{{end}}</p>

<section aria-labelledby="verdicts-h">
<h2 id="verdicts-h">Verdicts</h2>
{{- if .Rows}}
<div class="scroll" role="region" tabindex="0" aria-labelledby="verdicts-caption">
<table>
<caption id="verdicts-caption">One verdict per field the pull request touches</caption>
<thead><tr><th scope="col">Field</th><th scope="col">Decision</th><th scope="col">Winner</th><th scope="col">Rule</th><th scope="col">Until</th></tr></thead>
<tbody>
{{- range .Rows}}
<tr><th scope="row">{{template "fieldname" .}}</th><td>{{template "decision" .Verdict}}</td><td>{{if .Verdict.Winner}}{{.Verdict.Winner}}{{else}}none{{end}}</td><td><code>{{.Verdict.Rule}}</code></td><td>{{.Verdict.Until}}</td></tr>
{{- end}}
</tbody>
</table>
</div>
{{- else}}
<p>Parley judged no fields in this pull request.</p>
{{- end}}
</section>
{{- if .Rows}}

<section aria-labelledby="explanations-h">
<h2 id="explanations-h">Explanations</h2>
{{- range .Rows}}
<section id="{{.ID}}" aria-labelledby="{{.ID}}-h">
<h3 id="{{.ID}}-h">{{template "fieldname" .}}</h3>
<p>{{template "decision" .Verdict}} {{.Verdict.DecisionWords}} Deciding rule: <code>{{.Verdict.Rule}}</code>.</p>
{{template "steps" .Verdict}}
</section>
{{- end}}
</section>
{{- end}}
{{end}}`

const indexSrc = `{{define "content"}}
<h1>{{.Repository}}</h1>
{{- if .At}}
<p class="meta">As of {{.At}}</p>
{{- end}}

<section aria-labelledby="fields-h">
<h2 id="fields-h">Fields</h2>
{{- if .Fields}}
<div class="scroll" role="region" tabindex="0" aria-labelledby="fields-caption">
<table>
<caption id="fields-caption">{{if gt .Total (len .Fields)}}The first {{len .Fields}} of {{.Total}} fields with claims, in order of address, and their verdicts{{else}}Every field with claims, and its verdict{{end}}</caption>
<thead><tr><th scope="col">Field</th><th scope="col">Decision</th><th scope="col">Rule</th><th scope="col">Claims</th></tr></thead>
<tbody>
{{- range .Fields}}
<tr><th scope="row">{{template "fieldname" .}}</th><td>{{template "decision" .Verdict}}</td><td><code>{{.Verdict.Rule}}</code></td><td class="num">{{.Claims}}</td></tr>
{{- end}}
</tbody>
</table>
</div>
{{- else}}
<p>No field has claims.</p>
{{- end}}
</section>

<section aria-labelledby="gates-h">
<h2 id="gates-h">Gates</h2>
{{- if .Gates}}
<div class="scroll" role="region" tabindex="0" aria-labelledby="gates-caption">
<table>
<caption id="gates-caption">Gates Parley wrote, pausing the GitOps tool on a field</caption>
<thead><tr><th scope="col">Field</th><th scope="col">File</th><th scope="col">Rule</th><th scope="col">Until</th></tr></thead>
<tbody>
{{- range .Gates}}
<tr><th scope="row">{{template "fieldname" .}}</th><td><code>{{.File}}</code></td><td><code>{{.Rule}}</code></td><td>{{.Until}}</td></tr>
{{- end}}
</tbody>
</table>
</div>
{{- else}}
<p>Parley wrote no gates.</p>
{{- end}}
</section>
{{end}}`
