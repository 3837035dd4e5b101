#include "textflag.h"

// func int80(nr uintptr) uintptr: a call through i386's ABI (int $0x80),
// whose numbers differ from x86_64's.
TEXT ·int80(SB),NOSPLIT,$0-16
	MOVQ nr+0(FP), AX
	INT $0x80
	MOVQ AX, ret+8(FP)
	RET
