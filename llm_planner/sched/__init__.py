"""Who generates next: ready queues, priority (higher is more urgent), policies, the batch controller."""
