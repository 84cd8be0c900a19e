"""The run on Spark: the driver's steps (:mod:`.runner`), Spark's read of the window, the publishing task
each writer slot runs on an executor, how its attempts ended, and the guards around it (the watchdog, the
replica guard, the warm-up of Python workers, what changes on a Spark Connect route)."""
