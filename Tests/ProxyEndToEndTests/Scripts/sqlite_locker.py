"""Usage: python3 sqlite_locker.py CAPTURE. Run by CaptureTests (Tests/ProxyEndToEndTests).

Another writer of a capture, as any SQLite client is: takes the database's write lock (BEGIN IMMEDIATE) six times
for 300 ms each, printing "locked" each time and "done" at the end.
"""
import sqlite3, sys, time

if __name__ == "__main__" and (len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help")):
    sys.exit(__doc__)

c = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
for i in range(6):
    c.execute("BEGIN IMMEDIATE"); print("locked", flush=True); time.sleep(0.3); c.execute("COMMIT")
    time.sleep(0.05)
print("done", flush=True)
