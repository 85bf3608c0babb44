package arbiter

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/policy"
)

// owner applies a standing owner: when the field block names one and its condition holds, the
// owner holds the field (whether or not it has a live claim) and every other claim loses, unless
// owner_gives_way_when holds for a competing claim: then the owner gives the field up to it until
// it expires.
func (d *decision) owner() (core.Verdict, bool) {
	fr := d.fr
	if fr == nil || fr.Owner == "" {
		return core.Verdict{}, false
	}
	rule := "owner." + fr.Name
	if fr.OwnerWhen != nil {
		ok, err := d.fieldCondition(fr.OwnerWhen)
		if err != nil {
			d.step(rule, "error", "owner_when could not be evaluated ("+err.Error()+"): "+fr.Owner+" does not own the field")
			return core.Verdict{}, false
		}
		if !ok {
			d.step(rule, "not applicable", fr.Owner+" does not own this field: owner_when "+fr.OwnerWhen.Source+" is false")
			return core.Verdict{}, false
		}
	}
	var own *view
	rivals := d.cands[:0] // scratch: contest is not reached when the owner decides
	for _, v := range d.activeLive() {
		if v.Claim.Actor.Name == fr.Owner {
			own = v
		} else {
			rivals = append(rivals, v)
		}
	}
	d.cands = rivals
	detail := fr.Owner + " is the standing owner of this field"
	if fr.OwnerWhen != nil {
		detail += " (owner_when " + fr.OwnerWhen.Source + " holds)"
	}
	if fr.OwnerGivesWayWhen != nil && len(rivals) > 0 {
		if v, ok := d.givesWay(rule, detail, own, rivals); ok {
			return v, true
		}
	}
	for _, v := range rivals {
		v.status = lost
	}
	if own != nil {
		detail += "; its claim " + valueOf(own) + " wins"
	} else {
		detail += "; it has no live claim, and Git's value does not override it"
	}
	if others := d.names(lost); others != "" {
		detail += "; " + others + " lose to the owner"
		if fr.OwnerGivesWayWhen != nil {
			detail += " (owner_gives_way_when " + fr.OwnerGivesWayWhen.Source + " holds for none of their claims)"
		}
	}
	d.step(rule, "decided", detail+"; GitOps is told to ignore the field")
	if len(d.p.Rules) > 0 {
		d.step("rules", "not reached", "the standing owner decides this field, so no rule is consulted")
	}
	v := d.verdict(core.DecisionYield, rule, own)
	return v, true
}

// givesWay evaluates owner_gives_way_when for each competing live claim (claim) against the owner's
// live claim (other, nil when the owner has none). The claims are seen as rules see them: after
// trust, so a motivation the actor may not assert cannot make the owner give way. When the condition
// holds for one claim, the owner gives the field up to it until it expires; when it holds for
// several, the one that beats each of the others under the rules and ranks takes the field, or when
// none does, the most recent.
func (d *decision) givesWay(rule, detail string, own *view, rivals []*view) (core.Verdict, bool) {
	fr := d.fr
	cond := fr.OwnerGivesWayWhen
	var match []*view
	var failed []string
	for _, v := range rivals {
		ok, err := cond.Bool(d.p, d.env(v, own))
		if err != nil {
			failed = append(failed, v.label+": "+err.Error())
			continue
		}
		if ok {
			match = append(match, v)
		}
	}
	if failed != nil {
		d.step(rule, "error", "owner_gives_way_when could not be evaluated for "+strings.Join(failed, "; ")+"; treated as not holding")
	}
	if len(match) == 0 {
		return core.Verdict{}, false
	}
	w, how := match[0], ""
	if len(match) > 1 {
		w, how = d.pickGiver(match)
	}
	for _, v := range rivals {
		if v != w {
			v.status = lost
		}
	}
	if own != nil {
		own.status = lost
	}
	detail += ", but it gives way to " + w.label + " because owner_gives_way_when " + cond.Source + " holds for its claim " + valueOf(w)
	if how != "" {
		detail += " (" + how + ")"
	}
	if own != nil {
		detail += "; the owner's claim " + valueOf(own) + " loses"
	}
	var others []string
	for _, v := range rivals {
		if v != w {
			others = append(others, v.label)
		}
	}
	if others != nil {
		detail += "; " + strings.Join(others, ", ") + " lose to " + w.label
	}
	outcome := "gives way"
	if w.Claim.Expires.IsZero() {
		outcome = "gives way, no expiry"
		detail += "; the field is yielded to " + valueOf(w) + " with no end: the claim has no expiry, so " + fr.Owner +
			" holds the field again only when " + w.label + " withdraws or replaces it, or the condition stops holding"
	} else {
		then := fr.Owner + " holds the field again"
		var later []string
		for _, m := range match {
			if m != w && (m.Claim.Expires.IsZero() || m.Claim.Expires.After(w.Claim.Expires)) {
				later = append(later, m.label)
			}
		}
		if later != nil {
			then = "owner_gives_way_when is weighed again for the claims that remain (" + strings.Join(later, ", ") + ")"
		}
		detail += "; the field is yielded to " + valueOf(w) + " until " + fmtTime(w.Claim.Expires) + ", when the claim expires and " + then
	}
	d.step(rule, outcome, detail+"; GitOps is told to ignore the field")
	if len(d.p.Rules) > 0 && len(match) == 1 {
		d.step("rules", "not reached", "the standing owner's condition decides this field, so no rule is consulted")
	}
	v := d.verdict(core.DecisionYield, rule, w)
	v.Until = w.Claim.Expires
	return v, true
}

// pickGiver chooses among several claims the owner gives way to: the one that beats each of the
// others under the rules that apply to the field and the ranks, as in the contest; when none does,
// the most recent (match is in the canonical order, oldest first). how says which.
func (d *decision) pickGiver(match []*view) (*view, string) {
	var rules []int
	for ri, r := range d.p.Rules {
		if has(d.oi.rules, ri) && pathMatch(r.Fields, d.in.Field) {
			rules = append(rules, ri)
		}
	}
	var errs map[int]string
	names := make([]string, len(match))
	for i, m := range match {
		names[i] = m.label
	}
	several := "it holds for " + strings.Join(names, ", ")
	for _, c := range match {
		beatsAll, by, first := true, int16(0), true
		for _, o := range match {
			if o == c {
				continue
			}
			p := decidedPair{c, o, d.compare(c, o, rules, &errs)}
			subj, _ := p.subject()
			if !(p.out.kind == outWin && subj == c || p.out.kind == outVeto && subj != c) {
				beatsAll = false
				break
			}
			if first || deciderBefore(p.out.by, by) {
				by, first = p.out.by, false
			}
		}
		if beatsAll {
			d.ruleErrors(errs)
			return c, several + "; " + c.label + " beats the others (" + d.deciderName(by) + ")"
		}
	}
	d.ruleErrors(errs)
	w := match[len(match)-1]
	return w, several + "; none beats every other, so the most recent, " + w.label + "'s, takes the field"
}

// ruleErrors explains the rule conditions that failed to evaluate, in policy order.
func (d *decision) ruleErrors(errs map[int]string) {
	for ri := range d.p.Rules {
		if msg, ok := errs[ri]; ok {
			d.step(d.a.texts.ruleName[ri], "error", "the condition failed: "+msg+"; treated as not holding")
		}
	}
}

// pair outcome kinds.
const (
	outWin      uint8 = iota // the subject beats the other
	outVeto                  // the subject is vetoed (if it is Git's claim: the other wins)
	outHold                  // hold the field
	outEscalate              // humans decide
	outTie                   // nothing decides
)

// Deciders besides rule indices.
const (
	byRank    int16 = -1
	byUrgency int16 = -2
	byGitTie  int16 = -3
	byTie     int16 = -4
)

type pairOutcome struct {
	kind      uint8
	subjectIs uint8 // 0: the pair's first claim is the subject, 1: the second
	by        int16 // rule index, or one of the by* constants
}

type pairKey struct {
	a, b int32
	mask uint64
}

// compare decides between x and y: the first rule (in policy order) whose condition holds for
// (claim=x, other=y) or (claim=y, other=x), else ranks, then urgency.
func (d *decision) compare(x, y *view, rules []int, errs *map[int]string) pairOutcome {
	var key pairKey
	memo := d.a.allMemo
	if memo {
		key = pairKey{a: x.profile, b: y.profile}
		for _, r := range rules {
			key.mask |= 1 << uint(r)
		}
		if out, ok := d.a.pairs[key]; ok {
			return out
		}
	}
	out, clean := d.comparePair(x, y, rules, errs)
	if memo && clean {
		if len(d.a.pairs) >= maxPairCache {
			d.a.pairs = map[pairKey]pairOutcome{}
		}
		d.a.pairs[key] = out
	}
	return out
}

func (d *decision) comparePair(x, y *view, rules []int, errs *map[int]string) (pairOutcome, bool) {
	clean := true
	for _, ri := range rules {
		r := d.p.Rules[ri]
		for s, pr := range [2][2]*view{{x, y}, {y, x}} {
			ok, err := r.When.Bool(d.p, d.env(pr[0], pr[1]))
			if err != nil {
				if *errs == nil {
					*errs = map[int]string{}
				}
				(*errs)[ri] = err.Error()
				clean = false
				continue
			}
			if !ok {
				continue
			}
			kind := outWin
			switch r.Decision {
			case policy.RuleVeto:
				kind = outVeto
			case policy.RuleHold:
				kind = outHold
			case policy.RuleEscalate:
				kind = outEscalate
			}
			return pairOutcome{kind: kind, subjectIs: uint8(s), by: int16(ri)}, clean
		}
	}
	switch {
	case x.Rank != y.Rank:
		return pairOutcome{kind: outWin, subjectIs: b2u(y.Rank > x.Rank), by: byRank}, clean
	case x.Urgency != y.Urgency:
		return pairOutcome{kind: outWin, subjectIs: b2u(y.Urgency > x.Urgency), by: byUrgency}, clean
	case x.Git || y.Git:
		return pairOutcome{kind: outWin, subjectIs: b2u(y.Git), by: byGitTie}, clean
	}
	return pairOutcome{kind: outTie, by: byTie}, clean
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

type decidedPair struct {
	x, y *view
	out  pairOutcome
}

func (p decidedPair) subject() (*view, *view) {
	if p.out.subjectIs == 0 {
		return p.x, p.y
	}
	return p.y, p.x
}

// contest runs the pairwise rules and ranks between the remaining claims.
func (d *decision) contest() core.Verdict {
	rules, notApplicable := d.rules, d.notApplicable
	for ri, r := range d.p.Rules {
		if has(d.oi.rules, ri) && pathMatch(r.Fields, d.in.Field) {
			rules = append(rules, ri)
		} else {
			notApplicable = append(notApplicable, ri)
		}
	}
	var errs map[int]string
	pairs, vetoes, cands := d.pairs, d.vetoes, d.cands
	defer func() {
		d.pairs, d.vetoes, d.cands, d.rules, d.notApplicable = pairs, vetoes, cands, rules, notApplicable
	}()
	for {
		cands = cands[:0]
		if d.git != nil {
			cands = append(cands, d.git)
		}
		cands = append(cands, d.activeLive()...)
		pairs = pairs[:0]
		vetoedOne := false
		for i := 0; i < len(cands) && !vetoedOne; i++ {
			for j := i + 1; j < len(cands); j++ {
				out := d.compare(cands[i], cands[j], rules, &errs)
				p := decidedPair{cands[i], cands[j], out}
				if out.kind == outVeto {
					if subj, other := p.subject(); !subj.Git {
						subj.status, subj.vetoBy = vetoed, "rule."+d.p.Rules[out.by].Name
						subj.vetoRule, subj.vetoOther = d.p.Rules[out.by], other
						vetoes = append(vetoes, p)
						vetoedOne = true
						break
					}
				}
				pairs = append(pairs, p)
			}
		}
		if !vetoedOne {
			break
		}
	}
	d.ruleSteps(rules, notApplicable, append(vetoes, pairs...), errs)

	if len(cands) == 1 && d.git != nil {
		return d.gitStands()
	}
	if len(cands) == 0 {
		d.step("contest", "none", "no claim remains: neither Git nor any live actor holds a value for this field")
		return d.verdict(core.DecisionHold, "no-claims", nil)
	}
	if len(cands) == 1 {
		d.step("contest", "uncontested", cands[0].label+" is the only claim, and Git does not hold the field")
		return d.liveWins(cands[0], "uncontested")
	}
	for _, p := range pairs {
		if p.out.kind == outHold {
			rule := "rule." + d.p.Rules[p.out.by].Name
			return d.verdict(core.DecisionHold, rule, d.git) // asks the escalation's people, or the code owners
		}
	}
	// The winner beats every other claim.
	for _, c := range cands {
		beatsAll, by := true, int16(0)
		first, firstVsGit := true, false
		for _, p := range pairs {
			if p.x != c && p.y != c {
				continue
			}
			subj, _ := p.subject()
			won := p.out.kind == outWin && subj == c || p.out.kind == outVeto && subj != c
			if !won {
				beatsAll = false
				break
			}
			// Name the decider against live claims before the one against Git: the contest
			// between live claims is what a person wants explained.
			vsGit := p.x.Git || p.y.Git
			if first || (firstVsGit && !vsGit) || (vsGit == firstVsGit && deciderBefore(p.out.by, by)) {
				by, first, firstVsGit = p.out.by, false, vsGit
			}
		}
		if !beatsAll {
			continue
		}
		rule := d.deciderName(by)
		for _, o := range cands {
			if o != c {
				o.status = lost
			}
		}
		if c.Git {
			return d.gitWins(rule)
		}
		return d.liveWins(c, rule)
	}
	return d.escalate(cands, pairs)
}

// deciderBefore orders deciders for naming a verdict's rule: rules in policy order, then rank,
// urgency and Git's tie-break.
func deciderBefore(a, b int16) bool {
	if (a >= 0) != (b >= 0) {
		return a >= 0
	}
	if a >= 0 {
		return a < b
	}
	return a > b
}

func (d *decision) deciderName(by int16) string {
	switch by {
	case byRank:
		return "rank"
	case byUrgency:
		return "urgency"
	case byGitTie:
		return "git-tie"
	case byTie:
		return "tie"
	}
	return "rule." + d.p.Rules[by].Name
}

// ruleSteps explains every rule, and the fallbacks, over the pairs compared.
func (d *decision) ruleSteps(rules, notApplicable []int, pairs []decidedPair, errs map[int]string) {
	if len(pairs) == 0 {
		if len(d.p.Rules) > 0 {
			d.step("rules", "not needed", "no two claims compete, so no rule is needed")
		}
		return
	}
	tx := &d.a.texts
	for ri, r := range d.p.Rules {
		name := tx.ruleName[ri]
		if slices.Contains(notApplicable, ri) {
			d.step(name, "not applicable", tx.ruleNA[ri])
			continue
		}
		var decided []string
		notReached := false
		for _, p := range pairs {
			switch {
			case p.out.by == int16(ri):
				decided = append(decided, d.pairText(p, r.Decision))
			case p.out.by >= 0 && p.out.by < int16(ri):
				notReached = true
			}
		}
		switch {
		case decided != nil:
			d.step(name, "decided", strings.Join(decided, "; ")+" (when "+r.When.Source+")")
		case errs[ri] != "":
			d.step(name, "error", "the condition failed: "+errs[ri]+"; treated as not holding")
		case notReached:
			d.step(name, "no match", tx.ruleNotReached[ri])
		default:
			d.step(name, "no match", tx.ruleNoMatch[ri])
		}
	}
	var rank, urg, tie []string
	for _, p := range pairs {
		subj, other := p.subject()
		switch p.out.by {
		case byRank:
			rank = append(rank, subj.label+" ("+intentName(subj)+", rank "+fmtNum(subj.Rank)+") outranks "+
				other.label+" ("+intentName(other)+", rank "+fmtNum(other.Rank)+")")
		case byUrgency:
			urg = append(urg, fmt.Sprintf("%s (motivation %s, urgency %s) is more urgent than %s (%s, urgency %s)", subj.label,
				orNone(subj.Claim.Motivation.Kind), fmtNum(subj.Urgency), other.label, orNone(other.Claim.Motivation.Kind), fmtNum(other.Urgency)))
		case byGitTie:
			tie = append(tie, other.label+" ties with Git on rank and urgency, so Git's value stands")
		case byTie:
			tie = append(tie, p.x.label+" and "+p.y.label+" tie on rank and urgency")
		}
	}
	if rank != nil {
		d.step("rank", "decided", strings.Join(rank, "; "))
	}
	if urg != nil {
		d.step("urgency", "decided", strings.Join(urg, "; "))
	}
	if tie != nil {
		d.step("tie", "tie", strings.Join(tie, "; "))
	}
}

func (d *decision) pairText(p decidedPair, decision string) string {
	subj, other := p.subject()
	switch decision {
	case policy.RuleVeto:
		if subj.Git {
			return other.label + " wins: the rule vetoes Git's claim"
		}
		return subj.label + " is vetoed against " + other.label
	case policy.RuleHold:
		return "holds the field: " + subj.label + " against " + other.label
	case policy.RuleEscalate:
		return "asks humans to decide between " + subj.label + " and " + other.label
	}
	return subj.label + " beats " + other.label
}

func (d *decision) gitStands() core.Verdict {
	for _, v := range d.live {
		if v.status == vetoed {
			put, ask := d.askVeto()
			d.step("result", "veto", "Git's value "+d.git.Claim.Value.String()+" stands; the vetoed claims are refused"+putText(put))
			return d.vetoVerdict(d.firstBlock(vetoed), put, ask)
		}
	}
	for _, v := range d.live {
		if v.status == deferred {
			d.step("result", "enforce Git", "Git's value "+d.git.Claim.Value.String()+" stands while the freeze defers the other claims")
			return d.verdict(core.DecisionEnforceGit, d.firstBlock(deferred), d.git)
		}
	}
	d.step("result", "enforce Git", "no live claim competes: Git's value "+d.git.Claim.Value.String()+" stands")
	return d.verdict(core.DecisionEnforceGit, "no-contest", d.git)
}

func (d *decision) firstBlock(s status) string {
	for _, v := range d.live {
		if v.status == s {
			return v.vetoBy
		}
	}
	return ""
}

func (d *decision) gitWins(rule string) core.Verdict {
	for _, v := range d.live {
		if v.status == vetoed {
			put, ask := d.askVeto()
			d.step("result", "veto", "Git's value "+d.git.Claim.Value.String()+" stands; vetoed claims are refused and the others lose"+putText(put))
			return d.vetoVerdict(v.vetoBy, put, ask)
		}
	}
	if fz := d.firstBlock(deferred); fz != "" {
		d.step("result", "enforce Git", "Git's value "+d.git.Claim.Value.String()+" wins ("+rule+"); the changes "+fz+" deferred wait for the freeze to end")
		return d.verdict(core.DecisionEnforceGit, fz, d.git)
	}
	d.step("result", "enforce Git", "Git's value "+d.git.Claim.Value.String()+" wins ("+rule+")")
	return d.verdict(core.DecisionEnforceGit, rule, d.git)
}

// askVeto finds the vetoed claim to put to people: of the vetoed claims whose vetoing block (the
// field block, or the veto rule) has veto_ask_when holding for them, the most recent. It explains
// the outcome and returns the claim (nil: none) and who is asked: the block's veto_ask, else the
// escalation's ask; nil when the policy names nobody.
func (d *decision) askVeto() (*view, []string) {
	var put *view
	var putBy *policy.VetoAsk
	var src string
	var failed []string
	for _, v := range d.live {
		if v.status != vetoed {
			continue
		}
		va, block, other := d.vetoAskOf(v)
		if va == nil {
			continue
		}
		ok, err := va.When.Bool(d.p, d.env(v, other))
		if err != nil {
			failed = append(failed, v.label+" ("+block+"): "+err.Error())
			continue
		}
		if ok && (put == nil || !v.Claim.At.Before(put.Claim.At)) {
			put, putBy, src = v, va, block
		}
	}
	if failed != nil {
		d.step("veto-ask", "error", "veto_ask_when could not be evaluated for "+strings.Join(failed, "; ")+"; treated as not holding: the veto only refuses")
	}
	if put == nil {
		return nil, nil
	}
	ask, from := putBy.Ask, "veto_ask of "+src
	if len(ask) == 0 {
		ask, from = d.p.Escalation.Ask, "the escalation's ask"
	}
	detail := put.label + "'s claim " + valueOf(put) + " is vetoed (" + put.vetoBy + "), but veto_ask_when " + putBy.When.Source +
		" holds for it (" + src + "): Git's value stands, and a pull request proposes " + valueOf(put) +
		" as a reviewed Git change, with the claim's intent, motivation and evidence"
	if len(ask) > 0 {
		detail += "; asking " + strings.Join(ask, ", ") + " (" + from + ") on it"
	}
	detail += ". Merged, the value is Git's like any other; closed, the veto stands"
	d.step("veto-ask", "asked", detail)
	if len(ask) == 0 {
		ask = d.ask(nil, "veto put to people", "no veto_ask, no escalation ask")
	}
	return put, ask
}

// ask returns who is asked about this what: the policy's people, else the code owners of the file
// that defines the field (Input.Owners). When it falls back, or finds nobody, it says so plainly in
// a step; unnamed says where the policy could have named people.
func (d *decision) ask(policyAsk []string, what, unnamed string) []string {
	if len(policyAsk) > 0 {
		return policyAsk
	}
	var o Owners
	if d.in.Owners != nil {
		o = d.in.Owners()
	}
	if len(o.Ask) > 0 {
		d.step("ask", "code owners", "the policy names nobody to ask for this "+what+"; asking the code owners of the field instead: "+
			strings.Join(o.Ask, ", ")+" ("+o.From+")")
		return slices.Clip(o.Ask)
	}
	why := o.From
	if why == "" {
		why = "which file defines the field is not known here, so no CODEOWNERS was read"
	}
	d.step("ask", "nobody", "the policy names nobody to ask for this "+what+" ("+unnamed+"), and no code owner either: "+why+
		". Nobody is asked: name people in the escalation block's ask, or add a CODEOWNERS line for the file")
	return nil
}

// vetoAskOf returns the veto_ask settings of what vetoed v, the block's name and the claim it was
// vetoed against (rules only).
func (d *decision) vetoAskOf(v *view) (*policy.VetoAsk, string, *view) {
	if v.vetoRule != nil {
		return v.vetoRule.VetoAsk, "rule." + v.vetoRule.Name, v.vetoOther
	}
	if d.fr != nil {
		return d.fr.VetoAsk, "field." + d.fr.Name, nil
	}
	return nil, "", nil
}

func putText(put *view) string {
	if put == nil {
		return ""
	}
	return "; " + put.label + "'s value " + valueOf(put) + " is put to people on a pull request"
}

// vetoVerdict is a veto verdict, with the claim put to people (if any) and who is asked.
func (d *decision) vetoVerdict(rule string, put *view, ask []string) core.Verdict {
	v := d.verdict(core.DecisionVeto, rule, d.git)
	if put != nil {
		c := put.Claim
		v.Proposed = &c
		v.Ask = ask
	}
	return v
}

// liveWins maps a winning live claim to a decision: agreeing with Git enforces Git; an expiring
// claim holds the field until it expires; a lasting one is adopted into Git.
func (d *decision) liveWins(w *view, rule string) core.Verdict {
	var same []string
	for _, l := range d.live {
		if l != w && (l.status == lost || l.status == active) && l.Claim.Value.Equal(w.Claim.Value) {
			same = append(same, l.label)
		}
	}
	if same != nil {
		verb := " want the same value "
		if len(same) == 1 {
			verb = " wants the same value "
		}
		d.step("same-value", "stands aside", strings.Join(same, ", ")+verb+valueOf(w)+
			"; as the weaker claim it yields to "+w.label+" and takes over only if "+w.label+"'s claim ends first")
	}
	switch {
	case d.git != nil && w.Claim.Value.Equal(d.git.Claim.Value):
		if fz := d.firstBlock(deferred); fz != "" {
			// The freeze is what keeps Git's value: without it a deferred change could have won.
			d.step("result", "enforce Git", w.label+" wins ("+rule+") and wants Git's own value "+valueOf(w)+
				"; the changes "+fz+" deferred wait for the freeze to end")
			return d.verdict(core.DecisionEnforceGit, fz, w)
		}
		d.step("result", "enforce Git", w.label+" wins ("+rule+") and wants Git's own value "+valueOf(w)+": nothing changes")
		return d.verdict(core.DecisionEnforceGit, rule, w)
	case !w.Claim.Expires.IsZero():
		then := ", then Git's value returns"
		for _, l := range d.live {
			if l != w && l.status == lost && (l.Claim.Expires.IsZero() || l.Claim.Expires.After(w.Claim.Expires)) {
				then = ", then the remaining claims are weighed again"
				break
			}
		}
		d.step("result", "yield", w.label+" wins ("+rule+"): the field is yielded to its value "+valueOf(w)+" until "+
			fmtTime(w.Claim.Expires)+then)
		v := d.verdict(core.DecisionYield, rule, w)
		v.Until = w.Claim.Expires
		return v
	}
	d.step("result", "adopt", w.label+" wins ("+rule+") with a lasting claim: its value "+valueOf(w)+" is adopted into Git")
	return d.verdict(core.DecisionAdopt, rule, w)
}

// escalate asks humans when no claim beats every other; after the escalation timeout the
// fallback decision applies.
func (d *decision) escalate(cands []*view, pairs []decidedPair) core.Verdict {
	esc := d.p.Escalation
	var start time.Time
	for _, c := range cands {
		if !c.Git && c.Claim.At.After(start) {
			start = c.Claim.At
		}
	}
	var why []string
	for _, p := range pairs {
		if p.out.kind == outEscalate || p.out.kind == outTie {
			why = append(why, p.x.label+" vs "+p.y.label)
		}
	}
	detail := "no claim beats every other (" + strings.Join(why, ", ") + ")"
	if len(esc.Ask) > 0 {
		detail += "; asking " + strings.Join(esc.Ask, ", ")
	}
	if esc.Timeout > 0 {
		deadline := start.Add(esc.Timeout)
		if !d.in.Now.Before(deadline) {
			d.step("escalation", "fallback", detail+"; nobody decided by "+fmtTime(deadline)+", so the fallback "+string(esc.Fallback)+" applies")
			for _, c := range cands {
				if !c.Git {
					c.status = lost
				}
			}
			return d.verdict(esc.Fallback, "escalation.fallback", d.git)
		}
		d.noteRecheck(deadline)
		detail += "; if nobody decides by " + fmtTime(deadline) + ", the fallback is " + string(esc.Fallback)
	}
	d.step("escalation", "escalated", detail)
	for _, c := range cands {
		if !c.Git {
			c.status = lost
		}
	}
	return d.verdict(core.DecisionEscalate, "escalation", nil) // asks the escalation's people, or the code owners
}

// verdict assembles the result: the winner's effective claim, every other standing live claim as a
// loser (with Git's claim when it lost; expired, superseded and yielded claims are only explained),
// the recheck time and the explanation.
func (d *decision) verdict(dec core.Decision, rule string, win *view) core.Verdict {
	var ask []string
	if dec == core.DecisionHold && rule != "no-claims" || dec == core.DecisionEscalate {
		ask = d.ask(d.p.Escalation.Ask, string(dec), "no escalation ask")
	}
	v := core.Verdict{Field: d.in.Field, Decision: dec, Rule: rule, Explanation: d.steps, Ask: ask}
	if win != nil {
		c := win.Claim
		v.Winner = &c
	}
	n := 0
	for _, l := range d.live {
		if l != win && l.status != expired && l.status != superseded && l.status != yielded {
			n++
		}
	}
	if n > 0 || (d.git != nil && win != d.git) {
		v.Losers = make([]core.Claim, 0, n+1)
		if d.git != nil && win != d.git {
			v.Losers = append(v.Losers, d.git.Claim)
		}
		for _, l := range d.live {
			if l != win && l.status != expired && l.status != superseded && l.status != yielded {
				v.Losers = append(v.Losers, l.Claim)
			}
		}
	}
	v.Recheck = d.recheck
	return v
}

func (d *decision) names(s status) string {
	var out []string
	for _, v := range d.live {
		if v.status == s {
			out = append(out, v.label)
		}
	}
	return strings.Join(out, ", ")
}

// compareClaims is the canonical order of claims: a total order over every field of a claim, so
// that sorting makes the input order irrelevant.
func compareClaims(a, b *core.Claim) int {
	if c := a.At.Compare(b.At); c != 0 {
		return c
	}
	if c := cmp.Or(
		cmp.Compare(a.Actor.Identity.Source, b.Actor.Identity.Source),
		cmp.Compare(a.Actor.Identity.ID, b.Actor.Identity.ID),
		cmp.Compare(a.Actor.Name, b.Actor.Name),
		cmp.Compare(a.Actor.Identity.Name, b.Actor.Identity.Name),
		slices.Compare(a.Actor.Identity.Groups, b.Actor.Identity.Groups),
		cmp.Compare(a.Value.JSON(), b.Value.JSON()),
		cmp.Compare(a.Value.Expr(), b.Value.Expr()),
		cmp.Compare(a.Intent, b.Intent),
		cmp.Compare(a.Motivation.Kind, b.Motivation.Kind),
		cmp.Compare(a.Motivation.Ref, b.Motivation.Ref),
		cmp.Compare(a.Motivation.Severity, b.Motivation.Severity),
		a.Expires.Compare(b.Expires),
		cmp.Compare(b2u(a.Yield), b2u(b.Yield)),
		cmp.Compare(a.Evidence.Source, b.Evidence.Source),
		cmp.Compare(a.Evidence.Commit, b.Evidence.Commit),
		cmp.Compare(a.Evidence.PR, b.Evidence.PR),
		slices.Compare(a.Evidence.EventIDs, b.Evidence.EventIDs),
		cmp.Compare(b2u(a.Evidence.Explicit), b2u(b.Evidence.Explicit)),
	); c != 0 {
		return c
	}
	return cmp.Compare(a.Field.String(), b.Field.String())
}

func valueOf(v *view) string {
	if v.Claim.Yield {
		return "(yield)"
	}
	return v.Claim.Value.String()
}

func intentName(v *view) string { return orNone(string(v.Claim.Intent)) }

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func intentList(is []core.Intent) string {
	if is == nil {
		return "any"
	}
	s := make([]string, len(is))
	for i, in := range is {
		s[i] = string(in)
	}
	return strings.Join(s, ", ")
}

func fmtTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// fmtDuration renders 1h0m0s as 1h and 4h30m0s as 4h30m.
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func fmtNum(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func quote(s string) string { return strconv.Quote(s) }

func patternList(ps []core.FieldPattern) string {
	if ps == nil {
		return "every field"
	}
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}
