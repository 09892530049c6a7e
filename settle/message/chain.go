package message

import "crypto/sha256"

// ChainHash is the ledger hash chain's step: the hash of one ledger row on
// an account, given the hash of the account's previous row (empty for its
// first). It covers the row's account key, settlement id, bucket and
// normalised amount, each length-prefixed so no two rows encode alike.
//
// Every settlement message carries its account's head (chain_hash), so a
// consumer of the settlements topic can verify the chain without the
// database, and `settle reconcile` verifies the database against itself:
// a row inserted, changed or removed behind settle's back breaks it.
func ChainHash(prev []byte, tenant, subject, currency, settlementID, bucket, amount string) []byte {
	h := sha256.New()
	h.Write(prev)
	for _, s := range []string{tenant, subject, currency, settlementID, bucket, amount} {
		var n [4]byte
		n[0], n[1], n[2], n[3] = byte(len(s)>>24), byte(len(s)>>16), byte(len(s)>>8), byte(len(s))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	return h.Sum(nil)
}
