// a worker header
