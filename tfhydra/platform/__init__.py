"""The ground floor: the process tfhydra runs in, before and beside TensorFlow.

keras_env.py (TF_USE_LEGACY_KERAS before TensorFlow loads), keras_lib.py (the seam: the run's Keras for every room,
and what differs between tf_keras and Keras 3), private_api.py (the one door to TensorFlow's and Keras' private
names), runtime.py (cores, threads, seeds), hostmemory.py, startclock.py (when the process started), startup.py
(TensorFlow imported while Hydra works; a fast exit), terminal.py (what a terminal is shown), quiet.py (TensorFlow's
noise held back from the console and kept in train.log), command.py (the name the user runs tfhydra by, and the
command line they typed), scheduler.py (the SLURM job or Ray task this process is), deadline.py (a call into a
server tfhydra does not own, waited on for a bounded time that a signal cuts short; a watchdog's signal wake-up and
its way out), grpc_probe.py (does a gRPC server answer at host:port: the tf.data service's dispatcher, a Ray head),
versions.py (the TensorFlow, tf-keras and Keras floors that carry security fixes, and the warning for an older one).
Imports no room but config/.
"""
