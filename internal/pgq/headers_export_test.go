package pgq

// DecodeHeadersFast exposes the reflection-free headers decoder to its
// equivalence test.
var DecodeHeadersFast = decodeHeadersFast
