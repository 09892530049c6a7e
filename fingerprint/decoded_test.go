package fingerprint

import "testing"

// TestCloudEventTimeAsDataInstant: a CloudEvent whose time names the same
// instant as its data's occurred_at in other words (an offset, fraction
// digits) decodes, to the fingerprint of either alone.
func TestCloudEventTimeAsDataInstant(t *testing.T) {
	t.Parallel()
	d := newTestDecoder(t)
	ce := func(tm, occurred string) Decoded {
		data := `{"account_period":"2026-11"`
		if occurred != "" {
			data += `,"occurred_at":"` + occurred + `"`
		}
		return Prepare(d, []byte(`{"specversion":"1.0","id":"h-1","type":"hold_release","tenantid":"acme","subject":"a","time":"`+tm+`","data":`+data+`}}`), nil)
	}
	want := ce("2026-11-05T11:04:05Z", "")
	if want.Err != nil {
		t.Fatal(want.Err)
	}
	for _, c := range [][2]string{{"2026-11-05T12:04:05+01:00", "2026-11-05T11:04:05Z"}, {"2026-11-05T11:04:05.000Z", "2026-11-05T11:04:05Z"}} {
		got := ce(c[0], c[1])
		if got.Err != nil || got.Sum != want.Sum {
			t.Errorf("time %s, occurred_at %s: %v, fingerprint %x want %x", c[0], c[1], got.Err, got.Sum, want.Sum)
		}
	}
}

// BenchmarkPrepare is the per-record step of the way in: decode, identity,
// canonical form and fingerprint.
func BenchmarkPrepare(b *testing.B) {
	d := newTestDecoder(b)
	value := []byte(typicalUsage)
	b.SetBytes(int64(len(value)))
	b.ReportAllocs()
	for b.Loop() {
		if p := Prepare(d, value, nil); p.Err != nil {
			b.Fatal(p.Err)
		}
	}
}
