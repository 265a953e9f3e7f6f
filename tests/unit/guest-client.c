/* SPDX-License-Identifier: MIT */
#include <stdio.h>
int main(void) { return 77; }
