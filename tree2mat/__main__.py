from tree2mat.cli import run

run()
