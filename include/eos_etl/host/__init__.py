"""The machine the product runs on: free and answering ports, processes read from ``/proc``, the programs on
``PATH``. Every other package that starts or watches a process stands on this one."""
