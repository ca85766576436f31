// Placeholder translation unit for layers that have no sources yet.
