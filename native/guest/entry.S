/*
 * The test guest's ring-0 entry: as little code as possible, because ring 0 may be emulated (PVM: ~1M instr/s).
 *
 *   QEMU -kernel (PVH)                         kubevirt-ts VMM
 *   _start32: 32-bit, paging off, EBX = info   _start64: long mode already on (VMM page tables), RBX = info
 *     PAE, CR3 = our tables, EFER.LME, PG            |
 *     far jump to 64-bit ----------------------> common64: our GDT, CR3, stack, kernel_main() (TSS, IDT, kvmclock)
 *                                                  iretq to ring 3 (IOPL 3: the workload does its own port I/O)
 *                                                  -> user_entry -> workload_main(info)   (native speed)
 * Page tables: identity map of 0..4 GiB with 2 MiB pages, user-accessible, built by the assembler (no loop).
 */
#define XEN_ELFNOTE_PHYS32_ENTRY 18

	.section .note.Xen, "a"
	.align 4
	.long 4                       /* name size ("Xen\0") */
	.long 4                       /* desc size */
	.long XEN_ELFNOTE_PHYS32_ENTRY
	.asciz "Xen"
	.long _start32

	.section .text.entry, "ax"
	.code32
	.globl _start32
_start32:
	mov %ebx, %esi
	mov %cr4, %eax
	or $0x620, %eax               /* PAE | OSFXSR | OSXMMEXCPT */
	mov %eax, %cr4
	mov $pml4, %eax
	mov %eax, %cr3
	mov $0xc0000080, %ecx         /* EFER */
	rdmsr
	or $0x100, %eax               /* LME */
	wrmsr
	mov %cr0, %eax
	or $0x80010001, %eax          /* PG | WP | PE */
	mov %eax, %cr0
	lgdt gdt_desc
	ljmp $0x08, $from32

	.code64
from32:
	mov %esi, %ebx
	jmp common64

	.globl _start64
_start64:
common64:
	lgdt gdt_desc
	mov $0x10, %eax
	mov %eax, %ds
	mov %eax, %es
	mov %eax, %ss
	xor %eax, %eax
	mov %eax, %fs
	mov %eax, %gs
	mov $pml4, %eax
	mov %rax, %cr3
	lea kstack_top(%rip), %rsp
	pushq $0x08
	lea 1f(%rip), %rax
	pushq %rax
	lretq
1:
	mov %rbx, %rdi
	mov %rbx, %r15
	call kernel_main
	mov %r15, %rdi
	pushq $0x1b                   /* user SS */
	lea ustack_top(%rip), %rax
	pushq %rax
	pushq $0x3002                 /* RFLAGS: IOPL 3, IF off */
	pushq $0x23                   /* user CS */
	lea user_entry(%rip), %rax
	pushq %rax
	iretq

user_entry:
	call workload_main
	ud2

	/* #GP: kernel.c emulates port I/O that ring 3 was not allowed to do (see guest.h); anything else is fatal. */
	.globl gp_entry
gp_entry:
	push %rax
	push %rbx
	push %rcx
	push %rdx
	push %rsi
	push %rdi
	push %rbp
	push %r8
	push %r9
	push %r10
	push %r11
	mov %rsp, %rdi
	call gp_handler
	test %eax, %eax
	jz 7f
	pop %r11
	pop %r10
	pop %r9
	pop %r8
	pop %rbp
	pop %rdi
	pop %rsi
	pop %rdx
	pop %rcx
	pop %rbx
	pop %rax
	add $8, %rsp                  /* error code */
	iretq
7:	add $88, %rsp
	jmp exception_entry

	.globl exception_entry
exception_entry:                      /* every vector: report and stop (ring 0) */
	mov 8(%rsp), %rsi
	mov (%rsp), %rdi
	call kernel_exception
2:	hlt
	jmp 2b

	.section .data.pagetables, "aw"
	.align 4096
	.globl pml4
pml4:
	.quad pdpt + 0x7
	.fill 511, 8, 0
pdpt:
	.quad pd + 0x7
	.quad pd + 0x1007
	.quad pd + 0x2007
	.quad pd + 0x3007
	.fill 508, 8, 0
pd:
	.set i, 0
	.rept 2048
	.quad (i << 21) | 0x87        /* present, writable, user, 2 MiB page */
	.set i, i + 1
	.endr

	.section .data, "aw"
	.align 16
	.globl gdt
gdt:
	.quad 0
	.quad 0x00af9a000000ffff      /* 0x08 kernel code, 64-bit */
	.quad 0x00cf92000000ffff      /* 0x10 kernel data */
	.quad 0x00cff2000000ffff      /* 0x18 user data (SS 0x1b) */
	.quad 0x00affa000000ffff      /* 0x20 user code, 64-bit (CS 0x23) */
	.quad 0, 0                    /* 0x28 TSS, filled by kernel_main */
gdt_end:
gdt_desc:
	.word gdt_end - gdt - 1
	.quad gdt

	.section .bss
	.align 16
	.space 8192
	.globl kstack_top
kstack_top:
	.space 65536
ustack_top:

	.section .note.GNU-stack, "", @progbits
