/* SPDX-License-Identifier: MIT */
/* placeholder until the module lands */
int main(void)
{
        return 1;
}
