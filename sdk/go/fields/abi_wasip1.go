package fields

import "unsafe"

// The Wasm side of ABI version 6: the fields import.

//go:wasmimport eddy fields
func fieldsImport(ptr unsafe.Pointer, n uint32)

func hostFields(list []byte) { fieldsImport(unsafe.Pointer(unsafe.SliceData(list)), uint32(len(list))) }
