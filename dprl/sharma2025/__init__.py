"""Sharma, Vinod, Thakurta, Agarwal, Balle, Dann, Raghuveer (2025), "Preserving Expert-Level
Privacy in Offline Reinforcement Learning" (TMLR): expert populations, the private data
release (Algorithms 1-2, the sparse vector technique over trajectory prefixes) and its
privacy analysis (Section 5, Appendix A); the offline-RL learners (discrete CQL and BCQ) with
expert-level and selective DP-SGD (Algs. 3-4) and their accounting (Sec. 6, App. B.2)."""
