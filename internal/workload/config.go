package workload

import (
	"errors"
	"fmt"
	"regexp"
)

// Config describes a workload. The zero value of every field is a
// documented default; Validate says what cannot work.
type Config struct {
	// Tenants are named t-0, t-1, ...; 0 = 1.
	Tenants int
	// Subjects are the accounts, named s-0, s-1, ... with subject i in
	// tenant i mod Tenants, all in currency USD; 0 = Tenants.
	Subjects int
	// Partitions of the usage topic the records are spread over; 0 = 1.
	Partitions int
	// Period is every record's account_period (YYYY-MM); "" = "2026-07".
	Period string
	// Seed selects the stream: one seed, one workload.
	Seed uint64
	// Source, when not empty, is the source of every usage record, which
	// then also carries attributes {"region":"eu-west-1"}: provenance only,
	// never fingerprinted.
	Source string
	// Funding is the grant each subject's first record credits (in cents);
	// 0 = 1,000,000,000.00, enough that no hold of a benchmark-sized
	// workload is ever refused. A small one makes insufficient_funds
	// refusals happen.
	Funding Amount
	// Mix is the share of each kind of record.
	Mix Mix
	// TrackEffects keeps every identity's expected effect for
	// Model.Effects. Its memory grows with the workload (the benchmark,
	// whose memory is measured, leaves it off).
	TrackEffects bool `json:"-"`
}

// Mix is the share of each kind of record among all records. A share is
// drawn in this order: Duplicates, Conflicts, then (out of what is left)
// Corrections, Refunds, Holds, Releases, Captures, Grants, Poison; the rest
// is plain usage. Each subject's first record is a funding grant (see
// Config.Funding), whatever was drawn. A kind that needs a target (a
// duplicate, a conflict, a correction, a refund, a release, a capture)
// becomes plain usage when no target is at hand (nothing recent enough, the
// chain already refunded, the hold already released or captured).
type Mix struct {
	// Duplicates are exact repeats of a recent record (same identity, same
	// fingerprint): settled once, the repeat is a duplicate.
	Duplicates float64
	// Conflicts repeat a recent chain's root usage with another amount:
	// quarantined fingerprint_mismatch, with no effect.
	Conflicts float64
	// Corrections state a new total of a recent chain, with the next
	// finalization_version; a chain refunded is quarantined target_refunded.
	Corrections float64
	// Refunds return a recent chain's net charge, once per chain (refused
	// nothing_to_refund when it is 0).
	Refunds float64
	// Holds reserve an amount against the subject's available balance
	// (refused insufficient_funds when it is short).
	Holds float64
	// Releases release a recent active hold.
	Releases float64
	// Captures are usage that captures a recent active hold (charged in
	// full, the hold's remainder released).
	Captures float64
	// Grants credit the subject (besides its funding grant).
	Grants float64
	// Poison records are not valid records: half are not JSON (cut short),
	// half carry an amount as a JSON number. Dead-lettered invalid_json or
	// invalid_field.
	Poison float64

	// Reprovenanced is the share of duplicates that carry another source
	// and attributes (source "retry-path", attributes {"attempt":2}): still
	// duplicates, since provenance is not fingerprinted.
	Reprovenanced float64
	// CrossPartition is the share of duplicates of usage and grants keyed
	// "tenant/subject/retry" and so produced to another partition, as a
	// producer that retried through another route would. Half of them come
	// before their original in the stream (the original is held back for
	// up to RetryLeadMax records), half after it; either way one copy
	// settles and the other is a duplicate. Needs two partitions or more,
	// and no holds, releases or captures (see the package documentation).
	CrossPartition float64
}

// RetryLeadMax bounds how many records a cross-partition retry that comes
// first precedes its original by.
const RetryLeadMax = 2000

// periodForm is the contract's account_period.
var periodForm = regexp.MustCompile(`^[0-9]{4}-(0[1-9]|1[0-2])$`)

func (c Config) withDefaults() Config {
	if c.Tenants == 0 {
		c.Tenants = 1
	}
	if c.Subjects == 0 {
		c.Subjects = c.Tenants
	}
	if c.Partitions == 0 {
		c.Partitions = 1
	}
	if c.Period == "" {
		c.Period = "2026-07"
	}
	if c.Funding == 0 {
		c.Funding = fundingDefault
	}
	return c
}

// fundingDefault is Config.Funding's default.
const fundingDefault Amount = 1_000_000_000_00

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	c = c.withDefaults()
	m := c.Mix
	switch {
	case c.Tenants < 0 || c.Subjects < 0 || c.Partitions < 0:
		return errors.New("workload: tenants, subjects and partitions must be positive")
	case c.Tenants > c.Subjects:
		return fmt.Errorf("workload: %d tenants need at least as many subjects (have %d)", c.Tenants, c.Subjects)
	case c.Partitions > 1<<16:
		return fmt.Errorf("workload: %d partitions: at most 65536", c.Partitions)
	case !periodForm.MatchString(c.Period):
		return fmt.Errorf("workload: period %q is not YYYY-MM", c.Period)
	case c.Funding < 0:
		return fmt.Errorf("workload: funding %s must be positive", c.Funding)
	}
	for _, s := range []float64{m.Duplicates, m.Conflicts, m.Corrections, m.Refunds, m.Holds, m.Releases, m.Captures,
		m.Grants, m.Poison, m.Reprovenanced, m.CrossPartition} {
		if !(s >= 0 && s <= 1) {
			return errors.New("workload: shares must be between 0 and 1")
		}
	}
	switch {
	case m.Duplicates+m.Conflicts >= 1,
		m.Corrections+m.Refunds+m.Holds+m.Releases+m.Captures+m.Grants+m.Poison >= 1:
		return errors.New("workload: shares add up to 1 or more: leave room for usage")
	case m.CrossPartition > 0 && c.Partitions < 2:
		return errors.New("workload: cross-partition duplicates need two partitions or more")
	case m.CrossPartition > 0 && (m.Holds > 0 || m.Releases > 0 || m.Captures > 0):
		// A retry on another partition may settle before records that
		// precede its original: a charge landing early could refuse a hold
		// the model accepts.
		return errors.New("workload: cross-partition duplicates cannot be mixed with holds, releases or captures: the model could not be exact")
	}
	return nil
}
