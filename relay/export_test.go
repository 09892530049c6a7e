package relay

// Rounds is how many rounds read rows to publish.
func (r *Relay) Rounds() int64 { return r.rounds.Load() }
