package gguf

import "math"

// Value is one metadata value. Scalars hold the Go type matching Type
// (uint8, int8, uint16, int16, uint32, int32, float32, bool, string, uint64,
// int64, float64); arrays hold a slice of that type ([]string, []float32,
// []int32, ...) or []Value for nested arrays.
type Value struct {
	// Type is the value's type tag.
	Type ValueType
	// Elem is the element type when Type is ValueArray.
	Elem ValueType
	v    any
}

// Any returns the decoded Go value.
func (v Value) Any() any { return v.v }

// Uint returns an integer value as uint64; false for non-integers and
// negative values.
func (v Value) Uint() (uint64, bool) {
	switch x := v.v.(type) {
	case uint8:
		return uint64(x), true
	case uint16:
		return uint64(x), true
	case uint32:
		return uint64(x), true
	case uint64:
		return x, true
	case int8:
		return uint64(x), x >= 0
	case int16:
		return uint64(x), x >= 0
	case int32:
		return uint64(x), x >= 0
	case int64:
		return uint64(x), x >= 0
	}
	return 0, false
}

// Int returns an integer value as int64; false for non-integers and
// uint64 values above MaxInt64.
func (v Value) Int() (int64, bool) {
	switch x := v.v.(type) {
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint64:
		return int64(x), x <= math.MaxInt64
	}
	return 0, false
}

// Float returns a numeric value as float64.
func (v Value) Float() (float64, bool) {
	switch x := v.v.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	if i, ok := v.Int(); ok {
		return float64(i), true
	}
	if u, ok := v.Uint(); ok {
		return float64(u), true
	}
	return 0, false
}

// Metadata holds a file's key/values in file order.
type Metadata struct {
	keys   []string
	values map[string]Value
}

// Keys returns the keys in file order. The caller must not modify it.
func (m *Metadata) Keys() []string { return m.keys }

// Len returns the number of keys.
func (m *Metadata) Len() int { return len(m.keys) }

// Value returns the raw value of key.
func (m *Metadata) Value(key string) (Value, bool) {
	v, ok := m.values[key]
	return v, ok
}

// String returns a string value.
func (m *Metadata) String(key string) (string, bool) {
	s, ok := m.values[key].v.(string)
	return s, ok
}

// Uint returns a non-negative integer value of any integer type.
func (m *Metadata) Uint(key string) (uint64, bool) {
	v, ok := m.values[key]
	if !ok {
		return 0, false
	}
	return v.Uint()
}

// Int returns an integer value of any integer type.
func (m *Metadata) Int(key string) (int64, bool) {
	v, ok := m.values[key]
	if !ok {
		return 0, false
	}
	return v.Int()
}

// Float returns a numeric value (float32/float64, or an integer) as float64.
func (m *Metadata) Float(key string) (float64, bool) {
	v, ok := m.values[key]
	if !ok {
		return 0, false
	}
	return v.Float()
}

// Bool returns a bool value.
func (m *Metadata) Bool(key string) (bool, bool) {
	b, ok := m.values[key].v.(bool)
	return b, ok
}

// Strings returns a string array. The caller must not modify it.
func (m *Metadata) Strings(key string) ([]string, bool) {
	s, ok := m.values[key].v.([]string)
	return s, ok
}

// Float32s returns a float32 array. The caller must not modify it.
func (m *Metadata) Float32s(key string) ([]float32, bool) {
	s, ok := m.values[key].v.([]float32)
	return s, ok
}

// Int32s returns an integer array converted to int32: int32 arrays as
// stored, other integer arrays when every element fits.
func (m *Metadata) Int32s(key string) ([]int32, bool) {
	switch x := m.values[key].v.(type) {
	case []int32:
		return x, true
	case []uint32:
		return convertInts(x)
	case []int64:
		return convertInts(x)
	case []uint64:
		return convertInts(x)
	case []int16:
		return convertInts(x)
	case []uint16:
		return convertInts(x)
	case []int8:
		return convertInts(x)
	case []uint8:
		return convertInts(x)
	}
	return nil, false
}

func convertInts[T int8 | uint8 | int16 | uint16 | uint32 | int64 | uint64](xs []T) ([]int32, bool) {
	out := make([]int32, len(xs))
	for i, x := range xs {
		if int64(x) > math.MaxInt32 || int64(x) < math.MinInt32 || (x > 0 && uint64(x) > math.MaxInt32) {
			return nil, false
		}
		out[i] = int32(x)
	}
	return out, true
}
