"""The verdict statistics: intervals, paired differences, ranges, saturation, replication, and the rules that turn
them into words. Imports nothing else of ``ablations``."""
