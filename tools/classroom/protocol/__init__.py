"""The wire: frames between processes, plain data across the sandbox wall, the kernel's and the trusted side."""
