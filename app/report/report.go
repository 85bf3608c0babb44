package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/ghmarkdown"
)

const (
	// Marker starts every sticky comment Parley writes; the comment is found again by it and edited in
	// place, never posted twice.
	Marker = "<!-- parley:sticky -->"
	// dataPrefix opens the hidden HTML comment that carries the verdicts as JSON.
	dataPrefix = "<!-- parley:verdicts "
	dataSuffix = " -->"
	// Schema names the JSON document's format; bump it on any incompatible change.
	Schema = "parley.dev/verdicts/v2"
	// SchemaV1 is the format before claims took their one JSON shape: Go-cased claim keys and values
	// as {"json": ...}. Extract still reads it; nothing writes it.
	SchemaV1 = "parley.dev/verdicts/v1"
	// MaxCommentChars is GitHub's limit on a comment body; longer bodies are refused with 422.
	MaxCommentChars = 65536
)

// Document is the machine-readable content of a sticky comment (see docs/verdicts-json.md).
type Document struct {
	Schema    string         `json:"schema"`
	Head      string         `json:"head,omitempty"` // the head commit the verdicts were made for
	Generated time.Time      `json:"generated"`
	Truncated bool           `json:"truncated,omitempty"` // verdicts were summarised to fit; read the check run
	Details   string         `json:"details,omitempty"`   // where the full verdicts are (the check run URL)
	Verdicts  []core.Verdict `json:"verdicts"`
}

// Input is what a comment is rendered from.
type Input struct {
	Head       string
	Generated  time.Time
	DetailsURL string // link to the check run, used when the comment must be summarised
	Verdicts   []core.Verdict
	// Problems are what stopped parts of the pull request from being judged (a file too large to
	// read, a chart not rendered). They name files and quote errors, so they are data: each is
	// escaped and shown as a quote.
	Problems []string
	// Outcomes say what each verdict means for the pull request's own claim on its field
	// (OutcomeOf), shown in the table's "pull request" column; nil: no such column (verdicts that
	// are not a pull request's).
	Outcomes map[core.Field]Outcome
	// Notes are Parley's own Markdown (a missing policy, a refused command), shown as written:
	// text from a repository, commit, claim or user never goes here unescaped (see
	// internal/ghmarkdown).
	Notes []string
}

// Comment renders the sticky comment body. The result always fits MaxCommentChars: when the full
// rendering is too long, explanations are dropped first, then table rows, then the JSON is reduced
// to decisions only, each step saying so and pointing at DetailsURL.
func Comment(in Input) string {
	vs := sortedVerdicts(in.Verdicts)
	for _, level := range []detail{full, noExplanations, summaryRows} {
		if body := render(in, vs, level); len(body) <= MaxCommentChars {
			return body
		}
	}
	// Even the summary does not fit: keep the most rows that fit. The body grows with the row count,
	// so a binary search finds that count in a few renderings.
	lo, hi := 0, len(vs) // render(vs[:lo]) fits (checked below for lo = 0), render(vs[:hi]) does not
	if len(render(in, nil, summaryRows|cut)) > MaxCommentChars {
		return Marker + "\n### Parley\nVerdicts are too large to show here; see the check run.\n"
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if len(render(in, vs[:mid], summaryRows|cut)) <= MaxCommentChars {
			lo = mid
		} else {
			hi = mid
		}
	}
	return render(in, vs[:lo], summaryRows|cut)
}

type detail int

const (
	full           detail = 0
	noExplanations detail = 1
	summaryRows    detail = 2
	cut            detail = 4
)

func render(in Input, vs []core.Verdict, level detail) string {
	var b strings.Builder
	b.WriteString(Marker)
	b.WriteString("\n")
	b.WriteString(Headline(in.Verdicts, len(in.Problems))) // counts every verdict, also those a cut leaves out
	b.WriteString("\n\n")
	if len(vs) > 0 && in.Outcomes != nil {
		b.WriteString("| field | pull request | decision | winner | rule | until |\n|---|---|---|---|---|---|\n")
		for _, v := range vs { // the decision without its icon: the outcome's says whether it passes
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", ghmarkdown.CodeCell(v.Field.String()), outcomeLabel(in.Outcomes[v.Field]),
				ghmarkdown.Cell(string(v.Decision)), ghmarkdown.Cell(winner(v)), ghmarkdown.Cell(v.Rule), until(v))
		}
	} else if len(vs) > 0 {
		b.WriteString("| field | decision | winner | rule | until |\n|---|---|---|---|---|\n")
		for _, v := range vs {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", ghmarkdown.CodeCell(v.Field.String()), decisionLabel(v.Decision), ghmarkdown.Cell(winner(v)), ghmarkdown.Cell(v.Rule), until(v))
		}
	}
	if level&cut != 0 || level >= noExplanations {
		fmt.Fprintf(&b, "\nThis summary was shortened to fit a comment")
		if len(vs) < len(in.Verdicts) {
			fmt.Fprintf(&b, " (showing %d of %d fields)", len(vs), len(in.Verdicts))
		}
		b.WriteString(".")
		if in.DetailsURL != "" {
			fmt.Fprintf(&b, " Full explanations: %s", in.DetailsURL)
		}
		b.WriteString("\n")
	}
	if level == full {
		if t := Timelines(vs, in.Generated); t != "" {
			b.WriteString("\n<details open><summary>Timeline of the contested fields</summary>\n")
			b.WriteString(t)
			b.WriteString("\n</details>\n")
		}
		for _, v := range vs {
			fmt.Fprintf(&b, "\n<details><summary>Why <code>%s</code>: %s</summary>\n\n", ghmarkdown.HTML(v.Field.String()), ghmarkdown.HTML(string(v.Decision)))
			b.WriteString(Explanation(v))
			b.WriteString("\n</details>\n")
		}
	}
	for _, p := range in.Problems {
		fmt.Fprintf(&b, "\n> Problem: %s\n", ghmarkdown.Text(p))
	}
	for _, n := range in.Notes { // each line quoted, so a fenced block in a note stays one
		b.WriteString("\n> " + strings.ReplaceAll(strings.TrimRight(n, "\n"), "\n", "\n> ") + "\n")
	}
	doc := Document{Schema: Schema, Head: in.Head, Generated: in.Generated.UTC(), Details: in.DetailsURL, Verdicts: vs}
	if level >= summaryRows {
		doc.Truncated = true
		doc.Verdicts = make([]core.Verdict, len(vs))
		for i, v := range vs {
			doc.Verdicts[i] = core.Verdict{Field: v.Field, Decision: v.Decision, Rule: v.Rule, Until: v.Until, Recheck: v.Recheck}
		}
	}
	b.WriteString("\n")
	b.WriteString(encodeData(doc))
	b.WriteString("\n")
	return b.String()
}

// Explanation renders a verdict's steps as a Markdown list; every text in it is escaped
// (ghmarkdown.Text), as rules, details and claims quote the repository and its commits.
func Explanation(v core.Verdict) string {
	var b strings.Builder
	for _, s := range v.Explanation {
		fmt.Fprintf(&b, "- **%s** (%s): %s\n", ghmarkdown.Text(s.Rule), ghmarkdown.Text(s.Outcome), ghmarkdown.Text(s.Detail))
	}
	for _, l := range v.Losers {
		fmt.Fprintf(&b, "- lost: %s\n", ghmarkdown.Text(l.String()))
	}
	if !v.Recheck.IsZero() {
		fmt.Fprintf(&b, "- re-evaluated at %s\n", v.Recheck.UTC().Format(time.RFC3339))
	}
	return b.String()
}

// Headline is one line that says what the verdicts amount to, and how many parts of the change
// (files, documents, plans) could not be judged: a change Parley could not read is never headed
// as one that changes nothing.
func Headline(vs []core.Verdict, unjudged int) string {
	notJudged := fmt.Sprintf("%d part%s not judged", unjudged, plural(unjudged))
	if len(vs) == 0 {
		if unjudged > 0 {
			return "### Parley: nothing judged, " + notJudged
		}
		return "### Parley: no claimed fields change in this pull request"
	}
	counts := map[core.Decision]int{}
	for _, v := range vs {
		counts[v.Decision]++
	}
	parts := []string{fmt.Sprintf("%d field%s", len(vs), plural(len(vs)))}
	for _, d := range []core.Decision{core.DecisionVeto, core.DecisionEscalate, core.DecisionHold, core.DecisionYield, core.DecisionAdopt, core.DecisionEnforceGit} {
		if counts[d] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[d], d))
		}
	}
	if unjudged > 0 {
		parts = append(parts, notJudged)
	}
	return "### Parley: " + strings.Join(parts, ", ")
}

// ErrNoData means a comment carries no Parley verdicts.
var ErrNoData = errors.New("no parley verdicts in comment")

// RawData returns the hidden JSON document of a sticky comment as written, undecoded: the text
// between the last "<!-- parley:verdicts " and the " -->" after it.
func RawData(body string) ([]byte, error) {
	i := strings.LastIndex(body, dataPrefix)
	if i < 0 {
		return nil, ErrNoData
	}
	rest := body[i+len(dataPrefix):]
	j := strings.Index(rest, dataSuffix)
	if j < 0 {
		return nil, fmt.Errorf("parley verdicts comment is not closed")
	}
	return []byte(rest[:j]), nil
}

// PRComment is a pull request comment as GitHub lists it: who wrote it (the author's login) and
// what it says.
type PRComment struct {
	ID     int64
	Author string
	Body   string
}

// FindSticky returns Parley's sticky comment among cs, in the order GitHub lists them: the first
// whose author is login, the Parley App's own bot login ("<app-slug>[bot]", which GET /app gives
// as the slug), and whose body starts with Marker. Everyone else's comment is passed over however
// it starts: another App or a workflow (github-actions[bot]) is a Bot too and can post the marker
// first, and a person can quote it. ok is false when there is none.
func FindSticky(cs []PRComment, login string) (c PRComment, ok bool) {
	if login == "" {
		return PRComment{}, false
	}
	for _, c := range cs {
		if c.Author == login && strings.HasPrefix(c.Body, Marker) {
			return c, true
		}
	}
	return PRComment{}, false
}

// ExtractSticky reads the verdicts of Parley's sticky comment among a pull request's comments
// (FindSticky with login, the Parley App's bot login) and returns the comment it read, so the
// caller knows whose words it took. ErrNoData when the App wrote no sticky comment there.
func ExtractSticky(cs []PRComment, login string) (Document, PRComment, error) {
	c, ok := FindSticky(cs, login)
	if !ok {
		return Document{}, PRComment{}, fmt.Errorf("no sticky comment by %s: %w", login, ErrNoData)
	}
	doc, err := Extract(c.Body)
	if err != nil {
		return Document{}, c, fmt.Errorf("comment %d by %s: %w", c.ID, c.Author, err)
	}
	return doc, c, nil
}

// Extract reads the verdicts back out of a sticky comment body; other bots use the same format. It
// reads both parley.dev/verdicts/v2 and the older v1 (docs/verdicts-json.md); Document.Schema says
// which the comment carried, and the verdicts are the same either way. A body alone does not say
// who wrote it, and anyone who can comment can write this format: to read a pull request's
// verdicts, use ExtractSticky, which takes only the Parley App's own comment and says whose it
// read.
func Extract(body string) (Document, error) {
	data, err := RawData(body)
	if err != nil {
		return Document{}, err
	}
	// The schema first: a later version's document may not decode as this one.
	var head struct {
		Schema string `json:"schema"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return Document{}, fmt.Errorf("decode parley verdicts: %w", err)
	}
	if head.Schema != Schema && head.Schema != SchemaV1 {
		return Document{}, fmt.Errorf("parley verdicts have schema %q, want %q or %q", head.Schema, Schema, SchemaV1)
	}
	var doc Document
	if err := json.Unmarshal(data, &doc); err != nil {
		return Document{}, fmt.Errorf("decode parley verdicts (%s): %w", head.Schema, err)
	}
	for i, v := range doc.Verdicts {
		if v.Field.IsZero() {
			return Document{}, fmt.Errorf("parley verdict %d has no field", i)
		}
	}
	return doc, nil
}

// encodeData renders the hidden JSON. encoding/json escapes <, > and & as \u003c..., so no string in
// the data can close the HTML comment early.
func encodeData(doc Document) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(true)
	if err := enc.Encode(doc); err != nil {
		// Verdicts hold only encodable types; an error here is a programming error worth seeing.
		return dataPrefix + `{"schema":"` + Schema + `","error":"encode failed"}` + dataSuffix
	}
	data := strings.TrimRight(buf.String(), "\n")
	// "--" cannot appear in an HTML comment either; JSON never needs a literal "--" outside strings.
	data = strings.ReplaceAll(data, "--", `-\u002d`)
	return dataPrefix + data + dataSuffix
}

func sortedVerdicts(in []core.Verdict) []core.Verdict {
	vs := append([]core.Verdict(nil), in...)
	sort.SliceStable(vs, func(i, j int) bool {
		if ri, rj := severityOrder(vs[i].Decision), severityOrder(vs[j].Decision); ri != rj {
			return ri < rj
		}
		return vs[i].Field.String() < vs[j].Field.String()
	})
	return vs
}

// severityOrder puts what needs attention first.
func severityOrder(d core.Decision) int {
	switch d {
	case core.DecisionVeto:
		return 0
	case core.DecisionEscalate:
		return 1
	case core.DecisionHold:
		return 2
	case core.DecisionYield:
		return 3
	case core.DecisionAdopt:
		return 4
	}
	return 5
}

// outcomeLabel is an outcome in a table cell: an icon for what it lets the check do, then its text.
func outcomeLabel(o Outcome) string {
	if o.Kind == "" {
		return "—"
	}
	icon := map[string]string{"success": "✅", "action_required": "⏸️", "failure": "❌"}[o.Conclusion()]
	if o.Kind == OutcomeUnclaimed {
		icon = "➖"
	}
	return icon + " " + ghmarkdown.Cell(o.Text())
}

func decisionLabel(d core.Decision) string {
	icon := map[core.Decision]string{
		core.DecisionVeto: "⛔", core.DecisionEscalate: "🙋", core.DecisionHold: "⏸️",
		core.DecisionYield: "↪️", core.DecisionAdopt: "📥", core.DecisionEnforceGit: "✅",
	}[d]
	if icon == "" {
		return ghmarkdown.Cell(string(d))
	}
	return icon + " " + string(d)
}

func winner(v core.Verdict) string {
	if v.Winner == nil {
		return "—"
	}
	w := v.Winner
	s := w.Actor.String()
	why := string(w.Intent)
	if !w.Motivation.IsZero() {
		why += ", " + w.Motivation.String()
	}
	if why != "" {
		s += " (" + why + ")"
	}
	return s
}

func until(v core.Verdict) string {
	if v.Until.IsZero() {
		return "—"
	}
	return v.Until.UTC().Format(time.RFC3339)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
