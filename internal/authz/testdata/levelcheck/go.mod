module example.com/levelcheck

go 1.26.0
