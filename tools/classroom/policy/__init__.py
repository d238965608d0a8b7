"""The sandbox: one declared policy, its two enforcers (bwrap, the kernel zygote), handles, cgroups, servers."""
