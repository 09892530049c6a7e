package reconcile

import (
	"context"
	"fmt"
	"sort"

	"github.com/cespare/xxhash/v2"

	"github.com/settlehq/settle/corrections"
	"github.com/settlehq/settle/internal/money"
	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle/internal/db"
)

// recordNode is what the source holds at one (period, record_id): the
// chain members there by operation, and whether a record of another kind
// (a hold or grant: never a chain target) or a refund or reclaim of it is
// there. A correction, refund or reclaim names a recordNode; which chain
// that resolves to is corrections.ChainTarget's to say, as on the settling
// path.
type recordNode struct {
	usage, correction, reversal *chainMember
	other                       bool // a record there of a kind no chain operation may target
	refund, reclaim             bool
}

// chainMember is a source usage, correction or reversal: what its chain
// needs.
type chainMember struct {
	target    uint64 // the recordNode it corrects; 0 for a usage
	line      int64
	version   int64  // 0 for a reversal without one
	amount    string // "" for a reversal
	reversal  bool
	root      *chainRoot // set for a usage
	resolved  *chainRoot
	resolving bool
	done      bool // resolved (to resolved, or to nothing)
}

// chainRoot is a source chain's root usage and its final state.
type chainRoot struct {
	period, recordID, currency string
	line                       int64
	version                    int64
	winLine                    int64 // the line of the record that set version and amount
	amount                     string
	versionless                bool // a reversal without a version: last by definition
	refund, reclaim            bool

	// settleNet is the chain's net charge in settle's ledger, once
	// compareChainNets has read it (settled: settle has the root).
	settled   bool
	settleNet money.Dec
}

func (c *chainRoot) expected() money.Dec {
	if c.refund && !c.reclaim {
		return money.Dec{}
	}
	if c.versionless {
		return money.Dec{}
	}
	return money.MustParse(c.amount)
}

// recordHash names a record key: (period, record_id), the way a
// correction, refund or reclaim names its target.
func recordHash(period, recordID string) uint64 {
	d := xxhash.New()
	d.WriteString(period)
	d.Write([]byte{0})
	d.WriteString(recordID)
	return d.Sum64() | 1 // never 0: 0 is "no target"
}

// chainMember remembers what the net charge check needs of a record.
func (c *sourceCheck) chainMember(l *SourceLine) {
	r := &l.Record
	n := c.nodes[recordHash(r.AccountPeriod, r.RecordID)]
	if n == nil {
		n = &recordNode{}
		c.nodes[recordHash(r.AccountPeriod, r.RecordID)] = n
	}
	switch r.Kind {
	case record.KindUsage:
		n.usage = &chainMember{version: r.FinalizationVersion, amount: r.Amount, line: l.Line,
			root: &chainRoot{period: r.AccountPeriod, recordID: r.RecordID, currency: r.Currency, line: l.Line}}
	case record.KindCorrection:
		n.correction = &chainMember{target: recordHash(r.TargetPeriod(), r.Corrects), version: r.FinalizationVersion, amount: r.Amount, line: l.Line}
	case record.KindReversal:
		n.reversal = &chainMember{target: recordHash(r.TargetPeriod(), r.Corrects), version: r.FinalizationVersion, line: l.Line, reversal: true}
	case record.KindRefund:
		n.refund = true
	case record.KindReclaim:
		n.reclaim = true
	case record.KindHold, record.KindGrant:
		n.other = true
	}
}

// resolveTarget is the chain the records at a recordNode resolve to, by
// corrections.ChainTarget; nil when there is none (not in the source, a
// record of the wrong kind, members of two chains, a cycle).
func (c *sourceCheck) resolveTarget(h uint64, depth int) *chainRoot {
	n := c.nodes[h]
	if n == nil {
		return nil
	}
	var t corrections.ChainTarget
	var found [3]*chainRoot
	for i, m := range [3]*chainMember{n.usage, n.correction, n.reversal} {
		if m == nil {
			continue
		}
		var id int64
		if found[i] = c.resolve(m, depth+1); found[i] != nil {
			id = found[i].line // a root's line names it: unique, never 0
		}
		t.Add([3]record.Kind{record.KindUsage, record.KindCorrection, record.KindReversal}[i], id)
	}
	if n.other {
		t.Add(record.KindHold, 0)
	}
	id, res := t.Resolve()
	if res != corrections.TargetFound {
		return nil
	}
	for _, r := range found {
		if r != nil && r.line == id {
			return r
		}
	}
	return nil
}

// resolve finds the root of a source chain member.
func (c *sourceCheck) resolve(m *chainMember, depth int) *chainRoot {
	switch {
	case m.root != nil:
		return m.root
	case m.done:
		return m.resolved
	case m.resolving || depth > sourceChainDepthMax:
		return nil // a cycle, or a chain too deep to follow
	}
	m.resolving = true
	m.resolved = c.resolveTarget(m.target, depth)
	m.resolving, m.done = false, true
	return m.resolved
}

// compareChains works out each source chain's final charge and compares
// it with the charge settle's ledger rows make of the same chain, and both
// sides' totals.
func (c *sourceCheck) compareChains(ctx context.Context) error {
	c.finalStates()
	roots := make([]*chainRoot, 0, len(c.nodes))
	for _, n := range c.nodes {
		if n.usage != nil {
			roots = append(roots, n.usage.root)
		}
	}
	sort.Slice(roots, func(i, j int) bool { return roots[i].line < roots[j].line })
	totals := sourceTotals{}
	byKey := make(map[[2]string]*chainRoot, len(roots))
	for _, r := range roots {
		t := totals.get(totalKey{r.period, r.currency})
		t.source = t.source.Add(r.expected())
		t.sourceChains++
		byKey[[2]string{r.period, r.recordID}] = r
	}
	for start := 0; start < len(roots); start += SourceChunkIdentitiesMax {
		if err := c.compareChainNets(ctx, roots[start:min(start+SourceChunkIdentitiesMax, len(roots))], byKey); err != nil {
			return err
		}
	}
	if err := c.settleTotals(ctx, totals, byKey); err != nil {
		return err
	}
	for k, t := range totals {
		c.r.Totals = append(c.r.Totals, SourceTotal{Period: k.period, Currency: k.currency,
			Source: t.source.String(), Settle: t.settle.String(), Difference: t.settle.Sub(t.source).String(),
			SourceChains: t.sourceChains, SettleChains: t.settleChains})
	}
	sort.Slice(c.r.Totals, func(i, j int) bool {
		a, b := c.r.Totals[i], c.r.Totals[j]
		return a.Period < b.Period || (a.Period == b.Period && a.Currency < b.Currency)
	})
	return nil
}

// finalStates folds every chain member into its root: the final version and
// amount, whether the chain was reversed without a version, refunded or
// reclaimed.
func (c *sourceCheck) finalStates() {
	for h, n := range c.nodes {
		if n.refund || n.reclaim {
			if root := c.resolveTarget(h, 0); root != nil {
				root.refund, root.reclaim = root.refund || n.refund, root.reclaim || n.reclaim
			}
		}
		for _, m := range []*chainMember{n.correction, n.reversal} {
			if m == nil {
				continue
			}
			root := c.resolve(m, 0)
			switch {
			case root == nil:
			case m.reversal && m.version == 0:
				root.versionless = true
			// The highest version is final; of two with one version
			// (settle quarantines the later one version_conflict) the
			// first in the file.
			case root.amount == "" || m.version > root.version || (m.version == root.version && m.line < root.winLine):
				root.version, root.amount, root.winLine = m.version, m.amount, m.line
				if m.reversal {
					root.amount = "0"
				}
			}
		}
		if u := n.usage; u != nil {
			root := u.root
			if root.amount == "" || u.version > root.version || (u.version == root.version && u.line < root.winLine) {
				root.version, root.amount, root.winLine = u.version, u.amount, u.line
			}
		}
	}
}

// totalKey is one line of the totals: a period and a currency.
type totalKey struct{ period, currency string }

// totalSum is one line of the totals while it is summed: the charges as
// decimals, rendered once into a SourceTotal.
type totalSum struct {
	source, settle             money.Dec
	sourceChains, settleChains int64
}

// sourceTotals are the report's totals while they are summed.
type sourceTotals map[totalKey]*totalSum

func (ts sourceTotals) get(k totalKey) *totalSum {
	t := ts[k]
	if t == nil {
		t = &totalSum{}
		ts[k] = t
	}
	return t
}

// compareChainNets reads the net charge settle's ledger rows make of one
// chunk of source chains, in one query, and reports those that differ from
// the source's final amount.
func (c *sourceCheck) compareChainNets(ctx context.Context, part []*chainRoot, byKey map[[2]string]*chainRoot) error {
	periods, recs := make([]string, len(part)), make([]string, len(part))
	for i, r := range part {
		periods[i], recs[i] = r.period, r.recordID
	}
	rows, err := c.chainNets(ctx, db.SourceChainNetParams{TenantID: c.in.TenantID, Periods: periods, RecordIds: recs,
		FromPeriod: c.in.From, ToPeriod: c.in.To})
	if err != nil {
		return err
	}
	for _, row := range rows {
		period, recordID, currency, net := row.AccountPeriod, row.RecordID, row.Currency, row.NetCharge
		r := byKey[[2]string{period, recordID}]
		if r == nil {
			continue
		}
		want, got := r.expected(), money.MustParse(net)
		r.settled, r.settleNet = true, got
		if want.Cmp(got) != 0 || currency != r.currency {
			state := ""
			switch {
			case r.refund && r.reclaim:
				state = ", refunded and reclaimed"
			case r.refund:
				state = ", refunded"
			}
			c.add(SourceFinding{Class: ClassSourceNetDiffers, Period: period, RecordID: recordID, Operation: string(record.KindUsage),
				Line: r.line, Currency: r.currency, SourceAmount: want.String(), SettleAmount: got.String(),
				Detail: fmt.Sprintf("the source's final amount is %s %s (version %d%s); settle's ledger rows for the chain charge %s %s",
					want, r.currency, r.version, state, got, currency)})
		}
	}
	return nil
}

// settleTotals reads settle's side of the totals: per period and currency,
// the charge of the scope's chains. It walks the range's settled usages (the
// chains' roots) a page at a time; a chain compareChainNets read already
// counts its net as read there, and the nets of the others (chains the
// source lacks) are read as compareChainNets reads them
// (source_chain_net.sql).
func (c *sourceCheck) settleTotals(ctx context.Context, totals sourceTotals, byKey map[[2]string]*chainRoot) error {
	add := func(period, currency string, net money.Dec) {
		t := totals.get(totalKey{period, currency})
		t.settle = t.settle.Add(net)
		t.settleChains++
	}
	after := c.scanStart()
	for {
		after.Operations, after.PageRows = []string{string(record.KindUsage)}, sourcePageRowsMax
		roots, err := c.settledPage(ctx, after)
		if err != nil {
			return err
		}
		var periods, recs []string
		for _, r := range roots {
			after.AfterPeriod, after.AfterRecordID, after.AfterOperation = r.AccountPeriod, r.RecordID, r.Operation
			if known := byKey[[2]string{r.AccountPeriod, r.RecordID}]; known != nil && known.settled {
				add(r.AccountPeriod, r.Currency, known.settleNet)
				continue
			}
			periods, recs = append(periods, r.AccountPeriod), append(recs, r.RecordID)
		}
		if len(periods) > 0 {
			nets, err := c.chainNets(ctx, db.SourceChainNetParams{TenantID: c.in.TenantID, Periods: periods, RecordIds: recs,
				FromPeriod: c.in.From, ToPeriod: c.in.To})
			if err != nil {
				return err
			}
			for _, n := range nets {
				add(n.AccountPeriod, n.Currency, money.MustParse(n.NetCharge))
			}
		}
		if len(roots) < sourcePageRowsMax {
			return nil
		}
	}
}

// chainNetPlan is what a chunk's net charges run under: the query's
// per-root subqueries make its estimated cost large (5,000 roots, each
// priced as if a root had hundreds of rows), past the cost at which
// PostgreSQL compiles it with JIT, which took 3-4 s a chunk where the
// query itself takes under one.
const chainNetPlan = "SET LOCAL jit = off"

// chainNets reads one chunk's net charges (chainNetPlan), and restores
// the setting for the check's other queries.
func (c *sourceCheck) chainNets(ctx context.Context, p db.SourceChainNetParams) ([]db.SourceChainNetRow, error) {
	if _, err := c.tx.Exec(ctx, chainNetPlan); err != nil {
		return nil, err
	}
	rows, err := c.q.SourceChainNet(ctx, p)
	if err != nil {
		return nil, err
	}
	if _, err := c.tx.Exec(ctx, "RESET jit"); err != nil {
		return nil, err
	}
	return rows, nil
}
