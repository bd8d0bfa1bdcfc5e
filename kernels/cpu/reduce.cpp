// placeholder: filled by the kernel-library work
