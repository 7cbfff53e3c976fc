module example.com/testrunmod

go 1.26
