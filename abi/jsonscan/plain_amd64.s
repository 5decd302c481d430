//go:build !purego

#include "textflag.h"

// func plainPrefix16(b []byte) int
//
// Per 16 bytes x: PCMPEQB against '"' and '\\', and PMINUB(x, 0x1f) ==
// x for the bytes below 0x20 (an unsigned compare, which SSE2 lacks);
// the OR of the three masks, PMOVMSKB, BSF for the first.
TEXT ·plainPrefix16(SB), NOSPLIT, $0-32
	MOVQ b_base+0(FP), SI
	MOVQ b_len+8(FP), BX
	XORQ AX, AX
	MOVQ $0x2222222222222222, DX
	MOVQ DX, X1
	PUNPCKLQDQ X1, X1
	MOVQ $0x5c5c5c5c5c5c5c5c, DX
	MOVQ DX, X2
	PUNPCKLQDQ X2, X2
	MOVQ $0x1f1f1f1f1f1f1f1f, DX
	MOVQ DX, X3
	PUNPCKLQDQ X3, X3

loop:
	LEAQ 16(AX), DX
	CMPQ DX, BX
	JA   done
	MOVOU (SI)(AX*1), X0
	MOVO X0, X4
	PCMPEQB X1, X4
	MOVO X0, X5
	PCMPEQB X2, X5
	POR  X5, X4
	MOVO X0, X6
	PMINUB X3, X6
	PCMPEQB X0, X6
	POR  X6, X4
	PMOVMSKB X4, CX
	TESTL CX, CX
	JNZ  found
	MOVQ DX, AX
	JMP  loop

found:
	BSFL CX, CX
	ADDQ CX, AX

done:
	MOVQ AX, ret+24(FP)
	RET
