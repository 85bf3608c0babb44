package tfplan

import (
	"encoding/json"
	"time"

	"github.com/parleyhq/parley/core"
)

// DocumentSchema names the JSON document of a judged plan: what parley review --plan --json prints
// and POST /v1/plans answers (docs/schemas/plan-review.schema.json).
const DocumentSchema = "parley.dev/plan-review/v1"

// Document is a judged plan: the verdicts in review's shape, with the plan's changes beside them.
// Sensitive values are "(sensitive)" in it, never their value.
type Document struct {
	Schema     string         `json:"schema"`
	Generated  time.Time      `json:"generated"`
	Plan       PlanInfo       `json:"plan"`
	Author     DocumentAuthor `json:"author"`
	Changes    []ChangeJSON   `json:"changes"`
	Verdicts   []core.Verdict `json:"verdicts"`
	Conclusion string         `json:"conclusion"`
	Problems   []string       `json:"problems,omitempty"`
}

// PlanInfo says which plan was judged.
type PlanInfo struct {
	FormatVersion    string `json:"format_version"`
	TerraformVersion string `json:"terraform_version,omitempty"`
	Timestamp        string `json:"timestamp,omitempty"`
	ModuleDir        string `json:"module_dir"`
}

// DocumentAuthor is the identity the plan's claims were judged as.
type DocumentAuthor struct {
	Source string `json:"source"`
	ID     string `json:"id"`
	Name   string `json:"name,omitempty"`
}

// ChangeJSON is one attribute a plan changes; values as in parley fields diff --json, a sensitive
// one as "(sensitive)".
type ChangeJSON struct {
	Field     string          `json:"field"`
	Address   string          `json:"address"`
	Action    string          `json:"action"`
	Old       json.RawMessage `json:"old,omitempty"`
	OldExpr   string          `json:"old_expr,omitempty"`
	New       json.RawMessage `json:"new,omitempty"`
	NewExpr   string          `json:"new_expr,omitempty"`
	Sensitive bool            `json:"sensitive,omitempty"`
	// Blocks is the decision that stops the plan on this change: veto, hold or escalate.
	Blocks string `json:"blocks,omitempty"`
}

// NewDocument builds the document of a plan res judged into js as author.
func NewDocument(res Result, js []Judgement, author core.Identity, moduleDir string, now time.Time) Document {
	doc := Document{Schema: DocumentSchema, Generated: now.UTC(), Conclusion: res.Conclusion(js), Problems: res.Notes,
		Plan:     PlanInfo{FormatVersion: res.FormatVersion, TerraformVersion: res.TerraformVersion, ModuleDir: moduleDir},
		Author:   DocumentAuthor{Source: string(author.Source), ID: author.ID, Name: author.Name},
		Changes:  []ChangeJSON{},
		Verdicts: []core.Verdict{},
	}
	if !res.Timestamp.IsZero() {
		doc.Plan.Timestamp = res.Timestamp.Format(time.RFC3339)
	}
	for _, j := range js {
		doc.Verdicts = append(doc.Verdicts, j.Verdict)
		for _, c := range j.Changes {
			pc := ChangeJSON{Field: c.Field.String(), Address: c.Address, Action: string(c.Action),
				Old: c.Old.RawJSON(), OldExpr: c.Old.Expr(), New: c.New.RawJSON(), NewExpr: c.New.Expr(), Sensitive: c.Sensitive}
			if c.Action != ActionDrift {
				pc.Blocks = string(j.Blocks)
			}
			doc.Changes = append(doc.Changes, pc)
		}
	}
	return doc
}
